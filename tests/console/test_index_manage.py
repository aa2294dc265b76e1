"""An index's upkeep from the console (gateway/console/index_manage.py, index_create.py):
created lexical or hybrid, re-embedded, recalibrated, deleted (confirmed first; refused while
a route or an owner names it, naming the key); admins only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.admin_app import ADMIN, AS_OWNER, admin_app
from tests.support.console import login

pytestmark = pytest.mark.anyio
PAGE = ("leave.md", "# 年假\n\n员工提前三天申请年假，经理审批后生效。\n".encode(), "text/markdown")


def _form(html: str, form_id: str) -> dict[str, str]:
    part = html.split(f'id="{form_id}"')[1].split("</form>")[0]
    return {"csrf": part.split('name="csrf" value="')[1].split('"')[0]}


async def test_create_lexical_then_embed_calibrate_and_delete(tmp_path: Path, private_index: Path, start_app: Any,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, _ = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    r = await c.post("/admin/indexes/create", headers=ADMIN, data={"name": "hr", "kind": "vectors"})
    assert r.status_code == 400 and not (private_index / "hr").exists()
    r = await c.post("/admin/indexes/create", headers=ADMIN, data={"name": "hr", "kind": "lexical"})
    assert r.status_code == 303 and (private_index / "hr" / "meta.json").is_file()
    assert not (private_index / "hr" / "dense").exists()  # lexical: no vectors
    assert (await c.post("/admin/indexes/hr/upload", headers=ADMIN, files=[("file", PAGE)])).status_code == 303

    for step in ("embed", "calibrate", "drop"):
        r = await c.post(f"/admin/indexes/hr/{step}", headers=AS_OWNER)
        assert r.status_code == 403 and "owner of docs" in r.json()["error"], step
        r = await c.post(f"/admin/indexes/nope/{step}", headers=ADMIN)
        assert r.status_code == 404, step
    r = await c.post("/admin/indexes/hr/embed", headers=ADMIN)
    assert r.status_code == 200 and "hybrid" in r.json()["result"], r.text
    assert (private_index / "hr" / "dense").is_dir()
    r = await c.post("/admin/indexes/hr/calibrate", headers=ADMIN)
    assert r.status_code == 200 and "too few documents to measure a cosine line" in r.json()["result"], r.text

    r = await c.post("/admin/indexes/docs/drop", headers=ADMIN)
    assert r.status_code == 409 and "tenants.acme.routes[0] (tech/software)" in r.json()["error"]
    assert (private_index / "docs" / "meta.json").is_file()

    assert (await login(c)).status_code == 303
    page = await c.get("/admin/indexes/hr")
    assert 'id="index-drop"' in page.text and 'id="index-embed"' in page.text
    csrf = _form(page.text, "index-drop")
    r = await c.post("/admin/indexes/hr/drop", data=csrf)
    assert r.status_code == 200 and 'id="confirm-form"' in r.text and (private_index / "hr").exists()
    r = await c.post("/admin/indexes/hr/drop", data={**csrf, "confirm": "1"})
    assert r.status_code == 303 and r.headers["location"] == "/admin/indexes?deleted=hr"
    assert not (private_index / "hr").exists()
    [kept] = list((private_index / ".removed-indexes").iterdir())
    assert kept.name.startswith("hr.") and (kept / "meta.json").is_file()
    assert "hr" not in gw.runtime.indexes.names()
    assert 'id="index-deleted"' in (await c.get("/admin/indexes?deleted=hr")).text


async def test_an_index_an_owner_owns_is_not_deleted(tmp_path: Path, private_index: Path, start_app: Any,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    text = path.read_text("utf-8")
    path.write_text(text.replace('[[tenants.acme.routes]]\nfirst_level_id = "tech"\nsecond_level_id = "software"\n'
                                 'index = "docs"\n', "").replace('[agent.routes.support]\nindex = "docs"',
                                                                 '[agent.routes.support]\nindex = "kb"'), "utf-8")
    r = await c.post("/admin/indexes/docs/drop", headers=ADMIN)
    assert r.status_code == 409 and "admin.users.otto.indexes" in r.json()["error"], r.text
