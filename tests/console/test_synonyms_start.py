"""Synonyms started from the browser (gateway/console/synonyms_start.py): the first save of an
index with no synonyms file creates synonyms/<index>.txt beside the config and names it there,
through the serialised config edit; refusals change nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config
from tests.support.admin_app import ADMIN, AS_OWNER, AS_VIEWER, admin_app

pytestmark = pytest.mark.anyio


async def test_the_first_save_creates_the_file_and_names_it_in_the_config(tmp_path: Path, private_index: Path,
                                                                          start_app: Any,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    before = path.read_text("utf-8")
    listed = await c.get("/admin/synonyms", headers=AS_OWNER)
    assert 'class="start" href="/admin/synonyms/docs"' in listed.text
    r = await c.get("/admin/synonyms/docs", headers=AS_OWNER)
    assert r.status_code == 200 and 'id="synonyms-start"' in r.text and "synonyms/docs.txt" in r.text
    assert 'id="synonyms-start"' not in (await c.get("/admin/synonyms/docs", headers=AS_VIEWER)).text
    assert (await c.get("/admin/synonyms/nope", headers=AS_OWNER)).status_code == 404

    r = await c.post("/admin/synonyms/docs/start", headers=AS_VIEWER, data={"text": "年假, 带薪年休假\n"})
    assert r.status_code == 403
    r = await c.post("/admin/synonyms/docs/start", headers=AS_OWNER, data={"text": "年假, 带薪年休假\n=> x\n"})
    assert r.status_code == 400 and 'data-line="2"' in r.text
    assert path.read_text("utf-8") == before and not (tmp_path / "synonyms" / "docs.txt").exists()

    r = await c.post("/admin/synonyms/docs/start", headers=AS_OWNER, data={"text": "年假, 带薪年休假\n"})
    assert r.status_code == 303 and r.headers["location"] == "/admin/synonyms/docs?done=start", r.text[-800:]
    assert (tmp_path / "synonyms" / "docs.txt").read_text("utf-8") == "年假, 带薪年休假\n"
    assert '[indexes.docs]\nsynonyms = "synonyms/docs.txt"' in path.read_text("utf-8")
    assert before.splitlines()[0] in path.read_text("utf-8")  # the rest of the file kept
    assert len(load_config(path).synonyms["docs"].rules) == 2  # two-way: one rule each way
    assert len(gw.runtime.config.synonyms["docs"].rules) == 2  # applied in this worker at once
    assert gw.reloader.reload("file") == "reloaded"
    page = await c.get("/admin/synonyms/docs", headers=AS_OWNER)
    assert "synonyms/docs.txt" in page.text and 'id="synonyms-start"' not in page.text
    hist = (await c.get("/admin/synonyms/docs.json", headers=AS_OWNER)).json()["history"]
    assert [h["action"] for h in hist] == ["start"]

    after = path.read_text("utf-8")
    r = await c.post("/admin/synonyms/docs/start", headers=ADMIN, data={"text": "a, b\n"})
    assert r.status_code == 409 and "synonyms/docs.txt" in r.text and path.read_text("utf-8") == after


async def test_a_file_already_there_is_never_overwritten(tmp_path: Path, private_index: Path, start_app: Any,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    (tmp_path / "synonyms").mkdir()
    (tmp_path / "synonyms" / "docs.txt").write_text("mine, kept\n", "utf-8")
    before = path.read_text("utf-8")
    r = await c.post("/admin/synonyms/docs/start", headers=ADMIN, data={"text": "a, b\n"})
    assert r.status_code == 409 and "exists already" in r.text
    assert path.read_text("utf-8") == before and (tmp_path / "synonyms" / "docs.txt").read_text() == "mine, kept\n"
