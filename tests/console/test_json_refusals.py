"""A client that asks for JSON (Accept: application/json) gets the console's refusals as
{"error"} with their status, the document writes' included (gateway/console/render.message);
a browser keeps the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.admin_app import ADMIN, AS_VIEWER, admin_app
from tests.support.console import login

pytestmark = pytest.mark.anyio
JSON = {"accept": "application/json"}
PAGE = ("leave.md", "# 年假\n\n提前三天申请年假。\n".encode(), "text/markdown")


async def test_document_write_refusals_answer_json_to_a_json_client(tmp_path: Path, private_index: Path,
                                                                    start_app: Any,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    r = await c.post("/admin/indexes/dosc/upload", headers={**ADMIN, **JSON}, files=[("file", PAGE)])
    assert r.status_code == 404 and r.headers["content-type"] == "application/json" and "dosc" in r.json()["error"]
    r = await c.post("/admin/indexes/docs/upload", headers={**AS_VIEWER, **JSON}, files=[("file", PAGE)])
    assert r.status_code == 403 and "viewer" in r.json()["error"]
    r = await c.get("/admin/indexes/docs/edit?id=nope", headers={**ADMIN, **JSON})
    assert r.status_code == 404 and "error" in r.json()
    r = await c.post("/admin/indexes/dosc/upload", headers=ADMIN, files=[("file", PAGE)])
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")  # a browser: the page
    assert (await login(c)).status_code == 303
    r = await c.post("/admin/indexes/docs/visibility", headers=JSON, data={"csrf": "stale", "id": "x"})
    assert r.status_code == 403 and "expired" in r.json()["error"]
    c.cookies.clear()
    r = await c.get("/admin/gaps", headers=JSON)
    assert r.status_code == 401 and "login required" in r.json()["error"]
