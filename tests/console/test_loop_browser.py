"""The owner's loop in a real headless Chromium on a real `kbgate serve` (Redis), with
gaps.keep_text = false, driven with the keyboard alone: a question two callers missed (two
wordings, one group through the index's analysis) → its Try button (the group's key, no text: the
owner types the question, the try says it belongs to the group, shows the gap threshold and
verdict and how each word was analysed) → the index's synonyms page (a refused line shown inline
with nothing applied, two rules added, the try on the page fires them) → Try from the gap again:
answered, its word matched through a synonym → file the task (a refresh files nothing) → mark
resolved → the task list → revert the synonyms, the question is asked again and the group
reopens. Every page fits 390 px and 1280 px; no question text in any page, JSON twin or the
server's log.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.credentials import new_credential
from gateway.console.links import document_url
from tests.support.browser import _browser, assert_fits_both, assert_keyboard, log_in  # noqa: F401
from tests.support.callbacks import post as callback
from tests.support.configs import ADMIN_TOKEN, ENV, TOKEN_ALICE
from tests.support.console import ENGLISH
from tests.support.harness import owner_site

pytestmark = pytest.mark.browser

OWNER = new_credential()
ASKED = ("凭证更换步骤", "凭证的更换步骤")  # two wordings, one analysis: 凭证, 更换, 步骤
TEXTS = ASKED
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _groups(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(base + "/admin/gaps.json", headers=ADMIN, timeout=10).json()["groups"])


def _until(base: str, ok: Any) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = _groups(base)
        if ok(got):
            return got
        time.sleep(0.1)
    raise AssertionError(_groups(base))


def _enter(page: Any, selector: str) -> None:
    """Focus `selector` and press Enter (a link or a form's control), waiting for the next page."""
    page.focus(selector)
    with page.expect_navigation():
        page.keyboard.press("Enter")


def _no_text(*texts: str) -> None:
    for t in texts:
        assert not any(q in t for q in TEXTS), t[:2000]


def _check(page: Any, url: str) -> None:
    assert_fits_both(page, url)
    assert_keyboard(page)
    _no_text(page.content())


def test_the_gap_loop_closed_with_the_keyboard(browser: Any, tmp_path: Path, docs_index: Path,
                                               redis_url: str) -> None:
    with owner_site(tmp_path, docs_index, redis_url, "loop", OWNER, show_queries=False, audit={"sink": "stdout"},
                    gaps={"flush_seconds": 0.1, "keep_text": False}) as srv, \
            httpx.Client(timeout=10, headers=ENGLISH) as c:
        assert orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query=ASKED[0]).content)["Result"] == []
        r = c.post(srv.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                   json={"knowledge_id": "support", "query": ASKED[1],
                         "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
        assert r.json()["records"] == []
        [g] = _until(srv.base, lambda gs: sum(x["count"] for x in gs) >= 2)
        assert (g["questions"], g["count"], g["status"], g["index"]) == (1, 2, "open", "kb")  # one question

        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            log_in(page, srv.base, OWNER, user="otto")
            _check(page, srv.base + "/admin/gaps")
            row = page.locator(f'tr[data-group="{g["id"]}"]')
            assert row.locator("td.status").inner_text().startswith("open")

            # Try from the group: its caller and route, no text (not kept): typed, then judged
            _enter(page, f'tr[data-group="{g["id"]}"] a.try')
            assert page.url == f"{srv.base}/admin/try?gap={g['id']}"
            assert "not kept" in page.locator("p.from-gap").inner_text()
            assert page.input_value('select[name="a_caller"]') == "volcengine"
            assert page.input_value('input[name="a_tenant"]') == "acme"
            assert page.input_value('input[name="a_second"]') == "software"
            _check(page, page.url)
            page.focus('input[name="query"]')
            page.keyboard.type(ASKED[0])
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert page.locator("p.member").get_attribute("data-member") == "yes"
            gap = page.locator('div.side[data-side="a"] p.gap')
            assert gap.get_attribute("data-gap") == "yes" and "0.30" in gap.inner_text()
            assert "no hit" in gap.inner_text()
            assert page.locator('tr.term[data-word="凭证"]').get_attribute("data-matched") == "unmatched"
            assert page.locator("tr.term").count() == 3
            assert_keyboard(page)

            # The index's synonyms: a refused line shown inline, nothing applied; then two rules
            page.get_by_role("navigation", name="Console").get_by_role("link", name="Synonyms").focus()
            with page.expect_navigation():
                page.keyboard.press("Enter")
            _check(page, page.url)
            _enter(page, 'a[aria-label="Synonyms of kb"]')
            page.focus('input[name="line"]')
            page.keyboard.type("凭证")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            refused = page.locator('tr.refused[data-line="2"]')
            assert "names one term" in refused.inner_text() and page.locator("p.error").count() == 1
            assert (tmp_path / "synonyms" / "kb.txt").read_text("utf-8") == "# kb: the owners' words\n"
            page.goto(srv.base + "/admin/synonyms/kb")
            for rule in ("凭证 => 密钥", "更换, 轮换"):
                page.focus('input[name="line"]')
                page.keyboard.type(rule)
                with page.expect_navigation():
                    page.keyboard.press("Enter")
                assert page.locator("p.note").get_attribute("data-done") == "add"
            assert page.locator("tr.rule").count() == 2 and page.locator("tr.change").count() == 2
            _check(page, page.url)
            page.focus('form[action$="/try"] input[name="query"]')
            page.keyboard.type("凭证轮换")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert "凭证 → 密钥" in page.locator("p.expansions").inner_text()
            assert page.locator('tr.hit[data-id="kb-1"]').count() == 1
            assert_keyboard(page)

            # Try from the gap again: answered now, 凭证 matched through its synonym
            page.goto(f"{srv.base}/admin/try?gap={g['id']}")
            page.focus('input[name="query"]')
            page.keyboard.type(ASKED[0])
            with page.expect_navigation():
                page.keyboard.press("Enter")
            gap = page.locator('div.side[data-side="a"] p.gap')
            assert gap.get_attribute("data-gap") == "no", gap.inner_text()
            word = page.locator('tr.term[data-word="凭证"]')
            assert word.get_attribute("data-matched") == "synonym" and "密钥" in word.inner_text()
            assert "密钥 (synonym of 凭证)" in page.locator("tr.kept td.terms").first.inner_text()
            link = page.locator("tr.kept a").first.get_attribute("href")
            assert link == document_url("kb", "kb-1", 0) == "/admin/indexes/kb/document?id=kb-1#chunk-0"
            page.set_viewport_size({"width": 390, "height": 900})
            assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth")
            page.set_viewport_size({"width": 1280, "height": 900})

            # File the task; a refresh files nothing; mark it resolved; the task list
            page.goto(srv.base + "/admin/gaps")
            _enter(page, f'tr[data-group="{g["id"]}"] button[aria-label^="File improvement task"]')
            assert "created" in page.locator("p.note").inner_text()
            page.reload()
            db = sqlite3.connect(tmp_path / "feedback.sqlite3")
            try:
                assert db.execute("SELECT count(*), max(count) FROM records").fetchone() == (1, 1)
            finally:
                db.close()
            row = page.locator(f'tr[data-group="{g["id"]}"]')
            assert row.get_attribute("data-status") == "filed" and "filed as" in row.inner_text()
            _enter(page, f'tr[data-group="{g["id"]}"] button.mark-resolved')
            assert page.locator(f'tr[data-group="{g["id"]}"]').get_attribute("data-status") == "resolved"
            _check(page, srv.base + "/admin/gaps")
            page.get_by_role("navigation", name="Console").get_by_role("link", name="Tasks").focus()
            with page.expect_navigation():
                page.keyboard.press("Enter")
            task = page.locator(f'tr[data-group="{g["id"]}"]')
            assert task.locator("td.status").inner_text() == "resolved" and task.get_attribute("data-record")
            _check(page, page.url)

            # Revert the synonyms (one step): asked again, it misses again and the group reopens
            page.goto(srv.base + "/admin/synonyms/kb")
            _enter(page, 'form[action$="/revert"] button')
            assert page.locator("tr.rule").count() == 1  # the second rule undone
            page.goto(srv.base + "/admin/synonyms/kb")
            _enter(page, 'form[action$="/revert"] button')  # a revert is itself a change: this redoes it
            assert page.locator("tr.rule").count() == 2
            (tmp_path / "synonyms" / "kb.txt").write_text("# kb: the owners' words\n", "utf-8")  # as from Git
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                time.sleep(0.3)
                got = orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query=ASKED[0]).content)["Result"]
                if not got:
                    break
            [again] = _until(srv.base, lambda gs: gs and gs[0]["status"] == "reopened")
            assert again["id"] == g["id"] and again["record"]
            page.goto(srv.base + "/admin/gaps")
            assert page.locator(f'tr[data-group="{g["id"]}"]').get_attribute("data-status") == "reopened"
        finally:
            page.close()
        tasks = httpx.get(srv.base + "/admin/tasks.json", headers=ADMIN).json()["tasks"]
        assert [t["status"] for t in tasks] == ["reopened"]
        _no_text(orjson.dumps(_groups(srv.base)).decode(), orjson.dumps(tasks).decode(), srv.logs())
