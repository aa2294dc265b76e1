"""Deleting a document from the console: a confirmation first (a page, no JavaScript), the
document kept restorable for admin.keep_deleted_days, restored from the index page or with
`kbgate deleted restore`, a restore refused while the id is taken again, nothing kept when the
window is 0. The store itself: tests/documents/test_deleted.py; the pages in Chromium:
tests/console/test_doc_deleted_browser.py."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from gateway.console.links import document_url
from gateway.core.clock import SYSTEM_CLOCK
from tests.console.test_browse import ADMIN, VIEWER, _app_config
from tests.support.configs import write
from tests.support.harness import kbgate

pytestmark = pytest.mark.anyio
DOC = "guide/key-rotation.md"


async def _doc(c: httpx.AsyncClient, doc_id: str = DOC) -> httpx.Response:
    return await c.get(document_url("docs", doc_id, json=True), headers=ADMIN)


async def _deleted(c: httpx.AsyncClient) -> list[dict[str, Any]]:
    r = await c.get("/admin/indexes/docs.json", headers=ADMIN)
    assert r.status_code == 200, r.text
    deleted: list[dict[str, Any]] = r.json()["deleted"]
    return deleted


async def test_a_delete_is_confirmed_first_and_can_be_taken_back(tmp_path: Path, private_index: Path,
                                                                redis_url: str, start_app: Any) -> None:
    c, _, clock = await start_app(_app_config(tmp_path, private_index, redis_url))
    before = (await _doc(c)).json()
    listing = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    assert 'href="docs/delete?id=guide/key-rotation.md" aria-label="Delete guide/key-rotation.md"' in listing
    ask = await c.get("/admin/indexes/docs/delete?id=" + DOC, headers=ADMIN)
    assert ask.status_code == 200 and f"Delete {DOC}?" in ask.text and f"Yes, delete {DOC}" in ask.text
    assert "restorable" in ask.text and "for 7 day(s)" in ask.text
    unconfirmed = await c.post("/admin/indexes/docs/delete", headers=ADMIN, data={"id": DOC})
    assert unconfirmed.status_code == 200 and f"Yes, delete {DOC}" in unconfirmed.text  # the same question
    assert (await _doc(c)).status_code == 200 and await _deleted(c) == []

    r = await c.post("/admin/indexes/docs/delete", headers=ADMIN, data={"id": DOC, "confirm": "1"})
    assert r.status_code == 303 and (await _doc(c)).status_code == 404
    [kept] = await _deleted(c)
    assert (kept["id"], kept["by"], kept["until"] - kept["deleted_at"]) == (DOC, "admin", 7 * 86400)
    assert kept["deleted_at"] == clock.now()
    page = (await c.get("/admin/indexes/docs", headers=ADMIN)).text
    assert 'data-deleted="guide/key-rotation.md"' in page and 'name="entry"' in page

    # a viewer sees nothing to restore with, and is refused
    refused = await c.post("/admin/indexes/docs/restore", headers={"authorization": f"Bearer vera:{VIEWER}"},
                           data={"entry": kept["entry"]})
    assert refused.status_code == 403 and (await _doc(c)).status_code == 404

    r = await c.post("/admin/indexes/docs/restore", headers=ADMIN, data={"entry": kept["entry"]})
    assert r.status_code == 303 and r.headers["location"] == document_url("docs", DOC)
    after = (await _doc(c)).json()
    assert after["title"] == before["title"] and after["revision"] == before["revision"]
    assert [ch["text"] for ch in after["chunks"]] == [ch["text"] for ch in before["chunks"]]
    assert await _deleted(c) == []
    again = await c.post("/admin/indexes/docs/restore", headers=ADMIN, data={"entry": kept["entry"]})
    assert again.status_code == 404 and "restored already" in again.text


async def test_a_restore_is_refused_while_the_id_is_taken_again(tmp_path: Path, private_index: Path,
                                                                redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_app_config(tmp_path, private_index, redis_url))
    files = [("file", ("notes.txt", "第一版。".encode(), "text/plain"))]
    assert (await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=files,
                         data={"folder": "hr"})).status_code == 303
    assert (await c.post("/admin/indexes/docs/delete", headers=ADMIN,
                         data={"id": "hr/notes.txt", "confirm": "1"})).status_code == 303
    files = [("file", ("notes.txt", "第二版。".encode(), "text/plain"))]
    assert (await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=files,
                         data={"folder": "hr"})).status_code == 303
    [kept] = await _deleted(c)
    r = await c.post("/admin/indexes/docs/restore", headers=ADMIN, data={"entry": kept["entry"]})
    assert r.status_code == 409 and "holds a document hr/notes.txt again" in r.text
    assert "第二版" in (await _doc(c, "hr/notes.txt")).json()["chunks"][0]["text"]
    assert [k["entry"] for k in await _deleted(c)] == [kept["entry"]]  # still restorable later


async def test_a_window_of_zero_keeps_nothing_and_says_so(tmp_path: Path, private_index: Path, redis_url: str,
                                                          start_app: Any) -> None:
    cfg = _app_config(tmp_path, private_index, redis_url)
    cfg = dataclasses.replace(cfg, admin=dataclasses.replace(cfg.admin, keep_deleted_days=0))
    c, _, _ = await start_app(cfg)
    ask = await c.get("/admin/indexes/docs/delete?id=" + DOC, headers=ADMIN)
    assert "for good" in ask.text and "admin.keep_deleted_days = 0" in ask.text
    assert (await c.post("/admin/indexes/docs/delete", headers=ADMIN,
                         data={"id": DOC, "confirm": "1"})).status_code == 303
    assert (await _doc(c)).status_code == 404 and await _deleted(c) == []
    assert not (private_index / ".deleted").exists()


async def test_kbgate_deleted_restores_what_the_console_deleted(tmp_path: Path, private_index: Path,
                                                                redis_url: str, start_app: Any) -> None:
    from tests.support.configs import ENV, config

    cfg = _app_config(tmp_path, private_index, redis_url)
    c, _, _ = await start_app(cfg, clock=SYSTEM_CLOCK)
    assert (await c.post("/admin/indexes/docs/delete", headers=ADMIN,
                         data={"id": DOC, "confirm": "1"})).status_code == 303
    path = write(tmp_path / "gateway.toml", config(tmp_path, indexes=private_index))
    listed = kbgate("deleted", "list", "--config", str(path), env=ENV)
    assert listed.returncode == 0 and f"docs  {DOC}  deleted" in listed.stdout and "by admin" in listed.stdout
    absent = kbgate("deleted", "restore", "--config", str(path), "--index", "docs", "no/such.md", env=ENV)
    assert absent.returncode == 1 and "no deletion of no/such.md" in absent.stderr
    done = kbgate("deleted", "restore", "--config", str(path), "--index", "docs", DOC, env=ENV)
    assert done.returncode == 0, done.stderr
    deadline = time.monotonic() + 10  # the app's reader sees the CLI's commit at its next reload check
    while (await _doc(c)).status_code != 200 and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert (await _doc(c)).status_code == 200 and await _deleted(c) == []
    purged = kbgate("deleted", "purge", "--config", str(path), env=ENV)
    assert purged.returncode == 0 and "0 deletion(s)" in purged.stdout
