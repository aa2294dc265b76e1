"""gateway.console.gaps.task_life through the app: a filed task carries its question and near
misses, gets an assignee, moves open → doing → done with the document that closed it (done
resolves the group), refuses what it cannot take, and exports as CSV safe from spreadsheet
formulas."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import pytest

from gateway.console.gaps.task_life import safe_cell
from tests.console.test_try_gap import ADMIN, KB_OWNER, KIM, OTTO, VERA, _app_with_gap
from tests.support.console import login

pytestmark = pytest.mark.anyio
ASKED = "=HYPERLINK(\"http://x\")火星基地的氧气配额是多少"


@pytest.mark.parametrize(("value", "cell"), [
    ("=1+1", "'=1+1"), ("+86", "'+86"), ("-2", "'-2"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("年假", "年假"), ("a=b", "a=b"), (None, ""), (3, "3"),
])
def test_a_cell_that_a_spreadsheet_would_run_is_quoted(value: Any, cell: str) -> None:
    assert safe_cell(value) == cell


async def _filed(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, str]:
    c, gid = await _app_with_gap(tmp_path, docs_index, start_app, monkeypatch, keep=True, query=ASKED)
    r = await c.post("/admin/gaps/file", headers=KIM, json={"group": gid})
    assert r.status_code == 200, r.text
    return c, gid


async def _task(c: Any, who: dict[str, str], gid: str) -> dict[str, Any]:
    [row] = [t for t in (await c.get("/admin/tasks.json", headers=who)).json()["tasks"] if t["group"] == gid]
    return dict(row)


async def test_a_task_moves_open_doing_done_with_its_assignee_and_closing_document(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _filed(tmp_path, docs_index, start_app, monkeypatch)
    t = await _task(c, KIM, gid)
    assert (t["task"], t["assignee"], t["document"], t["status"]) == ("open", "", "", "filed")
    assert t["questions"] == [ASKED]  # the task carries its question
    page = (await c.get("/admin/tasks", headers=KIM)).text
    assert f'id="task-form-{gid}"' in page and "<option value=\"kim\">kim</option>" in page
    r = await c.post("/admin/tasks/update", headers=KIM, json={"group": gid, "task": "doing", "assignee": "kim"})
    assert r.status_code == 200 and r.json()["task"] == "doing"
    assert (await _task(c, KIM, gid))["assignee"] == "kim"
    r = await c.post("/admin/tasks/update", headers=KIM,
                     json={"group": gid, "task": "done", "assignee": "kim", "document": "kb-3"})
    assert r.status_code == 200 and r.json()["status"] == "resolved"
    t = await _task(c, ADMIN, gid)
    assert (t["task"], t["document"], t["status"]) == ("done", "kb-3", "resolved")
    page = (await c.get("/admin/tasks", headers=ADMIN)).text
    assert 'class="closing-doc" href="/admin/indexes/kb/document?id=kb-3"' in page and 'data-task="done"' in page
    [g] = (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"]
    assert g["status"] == "resolved"


async def test_a_task_change_that_cannot_be_taken_is_refused_and_changes_nothing(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _filed(tmp_path, docs_index, start_app, monkeypatch)
    for body, status, says in (
            ({"group": gid, "task": "finished"}, 400, "task: must be one of open, doing, done"),
            ({"group": gid, "task": "doing", "assignee": "otto"}, 400, "otto is not a console user who may work"),
            ({"group": gid, "task": "done", "document": "no-such.md"}, 400, "has no document no-such.md"),
            ({"group": "0" * 32, "task": "doing"}, 404, "No such task")):
        r = await c.post("/admin/tasks/update", headers=KIM, json=body)
        assert r.status_code == status and says in r.json()["error"], r.text
    assert (await c.post("/admin/tasks/update", headers=KIM, content=b"[1]")).status_code == 400
    for who in (VERA, OTTO):  # a viewer may see the task, not change it; otto does not even see it
        r = await c.post("/admin/tasks/update", headers=who, json={"group": gid, "task": "done"})
        assert r.status_code in (403, 404), r.text
    assert (await _task(c, KIM, gid))["task"] == "open"


def _form(page: str, gid: str) -> dict[str, str]:
    form = page.split(f'id="task-form-{gid}"', 1)[1].split("</form>", 1)[0]
    return {k: form.split(f'name="{k}" value="', 1)[1].split('"', 1)[0] for k in ("group", "base", "csrf")}


async def test_a_stale_task_form_is_refused_and_keeps_the_newer_state(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _filed(tmp_path, docs_index, start_app, monkeypatch)
    assert (await login(c, "kim", KB_OWNER)).status_code == 303  # a browser session: the form, not a tool
    tab_a = _form((await c.get("/admin/tasks")).text, gid)
    tab_b = _form((await c.get("/admin/tasks")).text, gid)
    assert tab_a["base"] == tab_b["base"] == (await _task(c, KIM, gid))["version"]
    r = await c.post("/admin/tasks/update", data={**tab_a, "task": "done", "assignee": "kim", "document": "kb-3"})
    assert r.status_code == 303, r.text
    r = await c.post("/admin/tasks/update", data={**tab_b, "task": "doing", "assignee": "", "document": ""},
                     headers={"accept-language": "zh-CN"})
    assert r.status_code == 409 and "打开本页后，该任务已被修改" in r.text
    no_base = {k: v for k, v in tab_b.items() if k != "base"}
    r = await c.post("/admin/tasks/update", data={**no_base, "task": "doing"})
    assert r.status_code == 409  # a form always carries its version: one without is from an older page
    t = await _task(c, KIM, gid)
    assert (t["task"], t["assignee"], t["document"]) == ("done", "kim", "kb-3")  # A's save is kept
    c.cookies.clear()
    r = await c.post("/admin/tasks/update", headers=KIM, json={"group": gid, "task": "doing", "base": tab_b["base"]})
    assert r.status_code == 409 and "changed since this page was opened" in r.json()["error"]
    r = await c.post("/admin/tasks/update", headers=KIM, json={"group": gid, "task": "doing", "base": t["version"]})
    assert r.status_code == 200 and (await _task(c, KIM, gid))["assignee"] == ""
    r = await c.post("/admin/tasks/update", headers=KIM, json={"group": gid, "task": "open"})  # no base: as before
    assert r.status_code == 200 and r.json()["task"] == "open"


async def test_tasks_export_as_a_csv_attachment_without_formulas(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _filed(tmp_path, docs_index, start_app, monkeypatch)
    r = await c.get("/admin/tasks.csv", headers=KIM)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert r.headers["content-disposition"] == 'attachment; filename="kbgate-tasks.csv"'
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
    [row] = [x for x in rows if x["group"] == gid]
    assert row["questions"] == "'" + ASKED and row["task"] == "open" and row["index"] == "kb"
    viewer = (await c.get("/admin/tasks.csv", headers=VERA)).content.decode("utf-8-sig")
    assert gid in viewer and "火星" not in viewer  # a viewer's export holds no question text
