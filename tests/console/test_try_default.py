"""Try from a question alone (gateway/console/try_default.py): the form's defaults run on the
first route the user may use; and the menu shows only what the user may open."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.console.try_default import default_route, with_default_route
from gateway.console.users import ConsoleUser
from tests.support.admin_app import ADMIN, AS_OWNER, AS_VIEWER, admin_app

pytestmark = pytest.mark.anyio


async def test_a_question_alone_runs_on_the_first_route_the_user_may_use(tmp_path: Path, docs_index: Path,
                                                                         start_app: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, _ = await admin_app(tmp_path, docs_index, start_app, monkeypatch)
    for who in (ADMIN, AS_OWNER, AS_VIEWER):
        r = await c.post("/admin/try", headers=who, data={"query": "年假", "a_caller": "volcengine"})
        assert r.status_code == 200 and "no tenant" not in r.text, r.text[-1500:]
        assert 'value="acme"' in r.text or ">acme<" in r.text
    page = await c.get("/admin/try", headers=AS_OWNER)
    assert "acme" in page.text
    head = await c.head("/admin/try", headers=AS_OWNER)  # HEAD is a GET without the body, never a form post
    assert head.status_code == 200 and head.content == b""
    cfg = gw.runtime.config
    kira = ConsoleUser("kira", "owner", frozenset({"kb"}))  # owns an index no tenant route names
    assert default_route(cfg, kira) == {}  # kb has no route here: nothing to run on
    assert default_route(cfg, ConsoleUser("otto", "owner", frozenset({"docs"}))) == {
        "a_caller": "volcengine", "a_tenant": "acme", "a_first": "tech", "a_second": "software"}
    named = {"a_caller": "knowledge", "a_client": "alice", "a_route": "support"}
    assert with_default_route(cfg, kira, named) == named  # a form that names its route is kept


async def test_the_menu_shows_only_what_the_user_may_open(tmp_path: Path, docs_index: Path, start_app: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await admin_app(tmp_path, docs_index, start_app, monkeypatch)
    assert 'href="/admin/users"' in (await c.get("/admin/", headers=ADMIN)).text
    for who in (AS_OWNER, AS_VIEWER):
        html = (await c.get("/admin/", headers=who)).text
        assert 'href="/admin/users"' not in html and 'href="/admin/gaps"' in html


async def test_a_refused_try_says_why_in_the_users_language(tmp_path: Path, docs_index: Path, start_app: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await admin_app(tmp_path, docs_index, start_app, monkeypatch)
    form = {"query": "年假", "a_caller": "volcengine", "a_tenant": "nope", "a_first": "tech", "a_second": "software"}
    r = await c.post("/admin/try", headers={**ADMIN, "accept-language": "zh-CN"}, data=form)
    assert "没有租户 &#39;nope&#39;" in r.text and "no tenant" not in r.text, r.text[-1500:]
    r = await c.post("/admin/try", headers=ADMIN, data={**form, "a_tenant": "acme", "a_second": "hardware"})
    assert "tenant &#39;acme&#39; has no route tech/hardware" in r.text, r.text[-1500:]  # the suite's English
