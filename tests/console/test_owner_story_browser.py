"""The owner story, on a real `kbgate serve` with Redis, in a real headless Chromium.

Rationale: docs/design-notes.md, "tests/console/test_owner_story_browser.py".
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.credentials import new_credential
from tests.support.browser import _browser, assert_fits, assert_keyboard, log_in, shot_of, small_shot  # noqa: F401
from tests.support.callbacks import post as callback
from tests.support.configs import ADMIN_TOKEN, ENV, TOKEN_ALICE
from tests.support.console import ENGLISH
from tests.support.harness import owner_site
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

IMG = ROOT / "docs" / "img" if os.environ.get("KBGATE_DOCS_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
OWNER = new_credential()
PAGE = {"name": "leave.md", "mimeType": "text/markdown",
        "buffer": "# 带薪年休假\n\n员工入职满一年后，每年享有五天带薪年休假，需提前一周在系统中申请。\n".encode()}
ASKED = "带薪年休假怎么申请"  # the Volcengine user's words: the page's own
UNANSWERED = "公休能休多久"  # the Dify user's: colloquial, no word of the index
SHOWN = UNANSWERED  # as kept (nothing to mask in it: tests/console/test_gap_mask.py)
RULE = "公休, 带薪年休假"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _groups(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(base + "/admin/gaps.json", headers=ADMIN, timeout=10).json()["groups"])


def _press(page: Any, selector: str, key: str = "Enter") -> None:
    """Focus `selector` and press `key` (the keyboard alone), then wait for the next page."""
    page.focus(selector)
    with page.expect_navigation():
        page.keyboard.press(key)


def _type(page: Any, selector: str, text: str) -> None:
    """Focus the field `selector`, clear it and type `text` with the keyboard."""
    page.focus(selector)
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    page.keyboard.type(text)


def test_owner_story(browser: Any, tmp_path: Path, private_index: Path, redis_url: str) -> None:
    from playwright.sync_api import expect

    with owner_site(tmp_path, private_index, redis_url, "owner", OWNER, synonyms=False,
                    gaps={"flush_seconds": 0.1}) as srv, \
            httpx.Client(timeout=10, headers=ENGLISH) as c:
        def volcengine() -> list[dict[str, Any]]:
            r = callback(c, srv.base, ENV["ACME_SECRET"], query=ASKED)
            assert r.status_code == 200, r.text
            return list(orjson.loads(r.content)["Result"])

        assert volcengine() == []  # the page is not there yet
        page = browser.new_page(viewport={"width": 1280, "height": 900}, locale="zh-CN")
        try:
            log_in(page, srv.base, OWNER, user="otto")

            # 1. upload the page in the index browser: its ingest report
            page.goto(srv.base + "/admin/indexes/kb")
            page.set_input_files('form.upload input[name="file"]', [PAGE])
            _press(page, 'form.upload button[type="submit"]')
            report = page.locator("section.report")
            expect(report.locator("h2")).to_have_text("上传结果")
            expect(report.locator('li[data-id="leave.md"] .change')).to_have_text("已新增")
            box = report.bounding_box()
            small_shot(page, IMG / "owner-upload.png",
                       clip={"x": 0, "y": max(0, box["y"] - 60), "width": 1280,
                             "height": min(box["height"] + 80, 360)}, full_page=True)

            # 2. find it: the path filter, typed and submitted with the keyboard
            _type(page, 'form.filters:not(.upload) input[name="path"]', "leave")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            found = page.locator('table.docs tr[data-doc="leave.md"]')
            expect(found).to_have_count(1)
            expect(page.locator("table.docs tbody tr")).to_have_count(1)
            small_shot(page, IMG / "owner-find.png", clip={"x": 0, "y": 0, "width": 1280, "height": 560})

            # 3. the callback that missed finds it now (after the write's commit)
            got = volcengine()
            assert [r["Title"] for r in got][:1] == ["带薪年休假"], got

            # 4. a Dify question no word of the index answers: a gap group on the gaps page, its question shown
            r = c.post(srv.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                       json={"knowledge_id": "support", "query": UNANSWERED,
                             "retrieval_setting": {"top_k": 3, "score_threshold": 0.3}})
            assert r.status_code == 200 and r.json()["records"] == [], r.text
            deadline = time.monotonic() + 10
            while not (groups := [g for g in _groups(srv.base) if SHOWN in g["examples"]]):
                assert time.monotonic() < deadline, _groups(srv.base)
                time.sleep(0.1)
            [g] = groups
            page.goto(srv.base + "/admin/gaps")
            row = page.locator(f'tr[data-group="{g["id"]}"]')
            expect(row.locator("q.question")).to_have_text(SHOWN)
            assert row.get_attribute("data-status") == "open"
            expect(page.locator("h1")).to_have_text("kbgate：知识缺口")  # zh-CN by default
            shot_of(page, row, IMG / "owner-gap-question.png", above=70, below=90, most=420)
            page.set_viewport_size({"width": 390, "height": 900})
            assert_fits(page)
            expect(row.locator("q.question")).to_be_visible()
            small_shot(page, IMG / "owner-gaps-390.png", clip={"x": 0, "y": 0, "width": 390, "height": 900})
            page.set_viewport_size({"width": 1280, "height": 900})

            # 5. file its improvement task (the keyboard: focus the button, Enter)
            _press(page, f'tr[data-group="{g["id"]}"] form[action="/admin/gaps/file"] button[type="submit"]')
            record = page.locator("p.note[data-record]").get_attribute("data-record")
            assert record, page.content()

            # 6. the synonym, on the index's synonyms page: the index has none yet, the first save starts them
            page.goto(srv.base + "/admin/synonyms/kb")
            expect(page.locator("#no-file")).to_be_visible()
            _type(page, "#synonyms-text", RULE)
            page.keyboard.press("Tab")
            assert page.evaluate("document.activeElement.id") == "synonyms-start-save"
            with page.expect_navigation():
                page.keyboard.press("Enter")
            expect(page.locator("tr.rule")).to_have_count(1)
            small_shot(page, IMG / "owner-synonyms.png", clip={"x": 0, "y": 0, "width": 1280, "height": 520})
            assert RULE in (tmp_path / "synonyms" / "kb.txt").read_text("utf-8")

            # 7. Try from the gap: the question filled in (texts kept), answered through the synonym
            page.goto(srv.base + "/admin/gaps")
            _press(page, f'#try-{g["id"]}')
            assert page.input_value('input[name="query"]') == SHOWN
            assert page.input_value('select[name="a_caller"]') == "dify"
            _press(page, 'input[name="query"]')
            assert page.locator("p.member").get_attribute("data-member") == "yes"
            verdict = page.locator('div.side[data-side="a"] p.gap')
            assert verdict.get_attribute("data-gap") == "no", verdict.inner_text()
            word = page.locator('tr.term[data-word="公休"]')
            assert word.get_attribute("data-matched") == "synonym", word.inner_text()
            href = page.locator("tr.kept a").first.get_attribute("href")
            assert href.startswith("/admin/indexes/kb/document?id=leave.md"), href
            top = verdict.bounding_box()["y"]
            small_shot(page, IMG / "owner-try-answered.png",
                       clip={"x": 0, "y": max(0, top - 20), "width": 1280, "height": 560}, full_page=True)

            # 8. the task, on the Tasks page: otto takes it and moves it to done with the page that closed it
            page.goto(srv.base + "/admin/tasks")
            task = page.locator(f'#t-{g["id"]}')
            expect(task.locator("td.questions q")).to_have_text(SHOWN)
            assert task.get_attribute("data-task") == "open"
            page.focus(f'#task-{g["id"]}')
            page.keyboard.press("End")  # the last state: done
            assert page.input_value(f'#task-{g["id"]}') == "done"
            page.keyboard.press("Tab")
            page.keyboard.press("End")  # the assignee: otto (admin, otto: sorted)
            assert page.input_value(f'#assignee-{g["id"]}') == "otto"
            page.keyboard.press("Tab")
            page.keyboard.type("leave.md")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            task = page.locator(f'#t-{g["id"]}')
            assert (task.get_attribute("data-task"), task.get_attribute("data-assignee")) == ("done", "otto")
            assert task.locator("a.closing-doc").get_attribute("href") == "/admin/indexes/kb/document?id=leave.md"
            shot_of(page, task, IMG / "owner-task-done.png")
            page.set_viewport_size({"width": 390, "height": 900})
            assert_fits(page)
            small_shot(page, IMG / "owner-task-done-390.png", clip={"x": 0, "y": 0, "width": 390, "height": 900})
            page.set_viewport_size({"width": 1280, "height": 900})
            assert_keyboard(page)  # every control of the Tasks page by Tab, ringed, named apart
            csv = page.locator("#tasks-csv")
            assert csv.get_attribute("href") == "/admin/tasks.csv"
            with page.expect_download() as got:
                page.focus("#tasks-csv")
                page.keyboard.press("Enter")
            assert got.value.suggested_filename == "kbgate-tasks.csv"
        finally:
            page.close()
        assert [x["status"] for x in _groups(srv.base) if x["id"] == g["id"]] == ["resolved"]  # done resolves it
