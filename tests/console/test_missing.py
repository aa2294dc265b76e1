"""A wrong address or method under /admin is a console page in the user's language (JSON to a
JSON client); elsewhere, and with no console configured, the plain answers stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config
from tests.support.admin_app import ADMIN, admin_app
from tests.support.configs import ENV, two_tenants

pytestmark = pytest.mark.anyio
ZH = {"accept-language": "zh-CN,zh;q=0.9"}  # the suite's clients ask for English unless told


async def test_an_unknown_console_address_is_a_page_in_chinese_then_english(
        tmp_path: Path, private_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    r = await c.get("/admin/nope", headers=ZH)  # logged out: no navigation, a way back
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    assert "找不到页面" in r.text and "控制台没有这个地址的页面。" in r.text and 'href="/admin/"' in r.text
    assert 'lang="zh-CN"' in r.text and r.headers["cache-control"] == "no-store"
    r = await c.get("/admin/nope", headers={"accept-language": "en"})
    assert r.status_code == 404 and "Page not found" in r.text and "找不到" not in r.text
    r = await c.get("/admin/indexes/docs/nope/deeper", headers={**ADMIN, **ZH})  # logged in: the menu stays
    assert r.status_code == 404 and "找不到页面" in r.text and 'href="/admin/gaps"' in r.text
    r = await c.get("/admin/nope", headers={**ADMIN, "accept": "application/json"})
    assert r.status_code == 404 and r.json() == {"error": "not found"}
    for method, path in (("GET", "/admin/nope.json"), ("POST", "/admin/nope")):  # a tool: a JSON twin, a Bearer POST
        r = await c.request(method, path, headers=ADMIN)
        assert r.status_code == 404 and r.json() == {"error": "not found"}, (method, path)


async def test_a_wrong_method_on_a_console_page_keeps_its_allow_header(
        tmp_path: Path, private_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    r = await c.request("PUT", "/admin/", headers={**ADMIN, **ZH})
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert "不支持此请求方式" in r.text and "此页面不接受 PUT 请求。" in r.text
    r = await c.request("DELETE", "/admin/", headers={**ADMIN, "accept": "application/json"})
    assert r.status_code == 405 and r.json() == {"error": "method not allowed"} and "allow" in r.headers


async def test_outside_the_console_and_without_one_the_answers_stay_plain(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    c, _, _ = await start_app(load_config(two_tenants(tmp_path, docs_index)))
    r = await c.get("/nope")
    assert (r.status_code, r.text, r.headers["content-type"]) == (404, "Not Found", "text/plain; charset=utf-8")
    r = await c.put("/healthz")
    assert r.status_code == 405 and "<html" not in r.text
    (tmp_path / "off").mkdir()
    c, _, _ = await start_app(load_config(two_tenants(tmp_path / "off", docs_index, admin=False)))
    for method in ("GET", "PUT"):
        r = await c.request(method, "/admin/nope")
        assert (r.status_code, r.text) == (404, "Not Found")  # no console: as if absent
