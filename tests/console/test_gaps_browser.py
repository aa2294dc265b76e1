"""/admin/gaps and /admin/documents in a real headless Chromium (Debian's, driven by Playwright).

Rationale: docs/design-notes.md, "tests/console/test_gaps_browser.py".
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.browser import _browser, assert_fits, log_in  # noqa: F401  (the `browser` fixture: one Chromium per module)
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, EVERYTHING, TOKEN_ALICE, client, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

# Screenshots go to test-artifacts/ (gitignored); the gaps page's in docs/ are made by the owner story
# (test_owner_story_browser.py).
IMG = ROOT / "test-artifacts"
# threshold 0: only "no hit" is a gap here, whatever relevance the hits of 密钥轮换 get (tests/console/test_gaps
# covers low scores).
MISSES = ("火星基地的氧气配额是多少", "火星基地氧气配额是多少？", "火星基地的氧气配额是多少")


def test_gap_and_documents_pages(browser: object, tmp_path: Path, docs_index: Path, redis_url: str) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-gapsui-{port}",
                  admin_token=ADMIN_TOKEN, show_queries=False, agent=agent, audit={"sink": "off"},
                  gaps={"flush_seconds": 0.1, "threshold": 0.0, "keep_text": False},
                  access={"sqlite_path": str(tmp_path / "feedback.sqlite3")})
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        with httpx.Client(timeout=10, headers=ENGLISH) as c:
            for q in MISSES[:2]:
                assert orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query=q).content)["Result"] == []
            assert orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").content)["Result"]
            r = c.post(srv.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                       json={"knowledge_id": "support", "query": MISSES[2],
                             "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
            assert r.status_code == 200 and r.json()["records"] == []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            got = httpx.get(srv.base + "/admin/gaps.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
            if sum(g["count"] for g in got.json()["groups"]) >= 3:
                break
            time.sleep(0.1)

        page = browser.new_page(viewport={"width": 1280, "height": 560})
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            page.goto(srv.base + "/admin/gaps")
            expect(page.locator("h1")).to_have_text("kbgate: knowledge gaps")
            row = page.locator("tr[data-group]")
            expect(row).to_have_count(1)
            expect(row.locator("td.asked")).to_have_text("3")
            expect(row.locator("td.no-hit")).to_have_text("3")
            expect(row.locator("td.distinct")).to_have_text("1")  # two wordings, one analysis (same content words)
            expect(row.locator("td.callers")).to_have_text("volcengine:acme: 2, dify:alice: 1")
            for width in (390, 1280):
                page.set_viewport_size({"width": width, "height": 560})
                assert_fits(page, f"gaps at {width} px")
            html = page.content()
            assert not any(q in html for q in MISSES) and "火星" not in html  # gaps.keep_text = false

            bad = page.request.post(srv.base + "/admin/gaps/file", form={"group": row.get_attribute("data-group")
                                                                         or "", "csrf": "forged"})
            assert bad.status == 403

            page.click('text="File improvement task"')
            expect(page.locator("p.note")).to_contain_text("created")
            IMG.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(IMG / "admin-gaps.png"))
            page.click('text="File improvement task"')
            expect(page.locator("p.note")).to_contain_text("updated (filed before; count now 2)")
            db = sqlite3.connect(tmp_path / "feedback.sqlite3")
            try:
                assert db.execute("SELECT count(*), max(count) FROM records").fetchone() == (1, 2)
            finally:
                db.close()

            page.get_by_role("navigation", name="Console").get_by_role("link", name="Indexes").click()
            page.get_by_role("link", name="docs", exact=True).click()
            row = page.locator('tr.served[data-doc="guide/key-rotation.md"]')
            expect(row.locator("td.hits .served")).to_have_text("1")
            expect(row.locator("td.hits small")).to_have_text("top 1 · lower 0")  # the callback's top answer
            never = page.locator("tr.never").count()
            expect(page.locator(".never-count")).to_have_text(str(never))
            page.screenshot(path=str(IMG / "admin-documents.png"))
            assert (IMG / "admin-gaps.png").stat().st_size < 200_000
        finally:
            page.close()
