"""The owner story, on a real `kbgate serve` with Redis, in a real headless Chromium.

A knowledge owner (console user `otto`, role owner of index kb, question texts kept) logs in →
a signed Volcengine callback asks about 带薪年休假 and misses → otto uploads the page in the index
browser → the same callback finds it → a Dify app asks 公休能休多久, which no word of the index
answers → the question is a gap group on the gaps page → otto adds the synonym on the index's
synonyms page → Try from the gap: answered, 公休 matched through the synonym → Mark resolved.
The browser asks for no language, so the console answers in zh-CN, as an owner in China sees it.

Screenshots (for docs/knowledge-owners.md) go to test-artifacts/ (gitignored), and with
KBGATE_DOCS_SCREENSHOTS=1 to docs/img/, so that `make test` leaves the work tree as it found it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.credentials import hash_credential, new_credential
from tests.support.browser import _browser, assert_fits, log_in, small_shot  # noqa: F401
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, EVERYTHING, TOKEN_ALICE, client, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

IMG = ROOT / "docs" / "img" if os.environ.get("KBGATE_DOCS_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
OWNER = new_credential()
PAGE = {"name": "leave.md", "mimeType": "text/markdown",
        "buffer": "# 带薪年休假\n\n员工入职满一年后，每年享有五天带薪年休假，需提前一周在系统中申请。\n".encode()}
ASKED = "带薪年休假怎么申请"  # the Volcengine user's words: the page's own
UNANSWERED = "公休能休多久"  # the Dify user's: colloquial, no word of the index
RULE = "公休, 带薪年休假"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


def _groups(base: str) -> list[dict[str, Any]]:
    return list(httpx.get(base + "/admin/gaps.json", headers=ADMIN, timeout=10).json()["groups"])


def _submit(page: Any, selector: str) -> None:
    """Press `selector` (a form's button) and wait for the next page."""
    with page.expect_navigation():
        page.click(selector)


def test_owner_story(browser: Any, tmp_path: Path, private_index: Path, redis_url: str) -> None:
    from playwright.sync_api import expect

    port = free_port()
    (tmp_path / "synonyms").mkdir()
    (tmp_path / "synonyms" / "kb.txt").write_text("# kb: the owners' words\n", "utf-8")
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "kb"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS)], indexes=private_index, port=port,
                  redis_url=redis_url, key_prefix=f"kbgate-owner-{port}", admin_token=ADMIN_TOKEN, show_queries=True,
                  agent=agent, audit={"sink": "off"}, gaps={"flush_seconds": 0.1})
    data["indexes"]["kb"] = {"synonyms": "synonyms/kb.txt"}
    data["admin"]["users"] = {"otto": {"role": "owner", "indexes": ["kb"], "credential": hash_credential(OWNER)}}
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv, \
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
            page.set_input_files('input[type="file"]', [PAGE])
            _submit(page, 'button:text-is("上传文件")')
            report = page.locator("section.report")
            expect(report.locator("h2")).to_have_text("上传结果")
            expect(report.locator('li[data-id="leave.md"] .change')).to_have_text("已新增")
            box = report.bounding_box()
            small_shot(page, IMG / "owner-upload.png",
                       clip={"x": 0, "y": max(0, box["y"] - 60), "width": 1280,
                             "height": min(box["height"] + 80, 360)}, full_page=True)

            # 2. the callback that missed finds it now (after the write's commit)
            got = volcengine()
            assert [r["Title"] for r in got][:1] == ["带薪年休假"], got

            # 3. a Dify question no word of the index answers: a gap group on the gaps page
            r = c.post(srv.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                       json={"knowledge_id": "support", "query": UNANSWERED,
                             "retrieval_setting": {"top_k": 3, "score_threshold": 0.3}})
            assert r.status_code == 200 and r.json()["records"] == [], r.text
            deadline = time.monotonic() + 10
            while not (groups := [g for g in _groups(srv.base) if UNANSWERED in g["examples"]]):
                assert time.monotonic() < deadline, _groups(srv.base)
                time.sleep(0.1)
            [g] = groups
            page.goto(srv.base + "/admin/gaps")
            row = page.locator(f'tr[data-group="{g["id"]}"]')
            expect(row).to_contain_text(UNANSWERED)
            assert row.locator("td.status").inner_text().startswith("待处理")
            expect(page.locator("h1")).to_have_text("kbgate：知识缺口")
            page.set_viewport_size({"width": 390, "height": 900})
            assert_fits(page)
            small_shot(page, IMG / "owner-gaps-390.png", clip={"x": 0, "y": 0, "width": 390, "height": 900})
            page.set_viewport_size({"width": 1280, "height": 900})

            # 4. the synonym, on the index's synonyms page
            page.goto(srv.base + "/admin/synonyms/kb")
            page.fill('input[name="line"]', RULE)
            page.locator('input[name="line"]').press("Enter")
            page.wait_for_load_state()
            expect(page.locator("p.note")).to_have_attribute("data-done", "add")
            expect(page.locator("tr.rule")).to_have_count(1)
            small_shot(page, IMG / "owner-synonyms.png", clip={"x": 0, "y": 0, "width": 1280, "height": 520})
            assert RULE in (tmp_path / "synonyms" / "kb.txt").read_text("utf-8")

            # 5. Try from the gap: the question filled in (texts kept), answered through the synonym
            page.goto(srv.base + "/admin/gaps")
            _submit(page, f'tr[data-group="{g["id"]}"] a.try')
            assert page.input_value('input[name="query"]') == UNANSWERED
            assert page.input_value('select[name="a_caller"]') == "dify"
            page.locator('input[name="query"]').press("Enter")
            page.wait_for_load_state()
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

            # 6. mark the group resolved
            page.goto(srv.base + "/admin/gaps")
            _submit(page, f'tr[data-group="{g["id"]}"] button.mark-resolved')
            row = page.locator(f'tr[data-group="{g["id"]}"]')
            assert row.get_attribute("data-status") == "resolved"
            assert "已解决" in row.inner_text() and "，otto" in row.inner_text()
            box = row.bounding_box()
            small_shot(page, IMG / "owner-resolved.png",
                       clip={"x": 0, "y": max(0, box["y"] - 50), "width": 1280, "height": box["height"] + 60},
                       full_page=True)
        finally:
            page.close()
        assert [x["status"] for x in _groups(srv.base) if x["id"] == g["id"]] == ["resolved"]
