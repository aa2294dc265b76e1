"""/admin/try in a real headless Chromium (Debian's, driven by Playwright).

Rationale: docs/design-notes.md, "tests/console/test_try_browser.py".
"""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson
import pytest

from tests.support.browser import (
    _browser,  # noqa: F401  (the `browser` fixture: one Chromium per module)
    assert_fits,
    log_in,
)
from tests.support.callbacks import post as callback
from tests.support.configs import (
    ACME_KEYS,
    ADMIN_TOKEN,
    ENV,
    EVERYTHING,
    SECRETS,
    TOKEN_ALICE,
    client,
    config,
    tenant,
    write,
)
from tests.support.console import ENGLISH
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "test-artifacts"
QUERY = "密钥轮换"
GRANTS = ("knowledge.search", "search", "dify.retrieval", "mcp.search")


def test_try_page_shows_the_callers_answer_and_why(browser: object, tmp_path: Path, docs_index: Path,
                                                   redis_url: str, key_prefix: str) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], GRANTS, **EVERYTHING)}}
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, port=port, redis_url=redis_url, key_prefix=key_prefix, agent=agent,
                  admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    data["tenants"]["acme"]["routes"][0]["neighbours"] = 1  # a retrieval dial: the page shows it
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        with httpx.Client(timeout=10, headers=ENGLISH) as c:
            real = callback(c, srv.base, ENV["ACME_SECRET"], query=QUERY, limit=2).content
        results = orjson.loads(real)["Result"]
        assert len(results) == 2

        page = browser.new_page(viewport={"width": 1180, "height": 860})
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            page.goto(srv.base + "/admin/try")
            expect(page.locator("h1")).to_have_text("kbgate: try a question as a caller")

            page.fill('input[name="query"]', QUERY)
            page.fill('input[name="limit"]', "2")
            page.select_option('select[name="a_caller"]', "volcengine")
            page.fill('input[name="a_tenant"]', "acme")
            page.fill('input[name="a_first"]', "tech")
            page.fill('input[name="a_second"]', "software")
            page.select_option('select[name="b_caller"]', "dify")
            page.fill('input[name="b_client"]', "alice")
            page.fill('input[name="b_route"]', "support")
            page.fill('input[name="b_metadata_condition"]', '{"logical_operator":"and","conditions":[{"name":"path",'
                                                            '"comparison_operator":"start with","value":"ops/"}]}')
            with page.expect_navigation():
                page.click('form.try button[type="submit"]')
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "admin-try.png"), full_page=True)

            a = page.locator('div.side[data-side="a"]')
            expect(a.locator("h2")).to_have_text("volcengine acme tech/software")
            expect(a.locator("b.status")).to_have_text("200")
            assert a.locator("pre.body").inner_text() == real.decode("utf-8")  # the caller's body, byte for byte
            expect(a.locator("span.limit")).to_have_text("2")
            rows = a.locator("tr.kept")
            expect(rows).to_have_count(2)
            for i, item in enumerate(results):
                row = rows.nth(i)
                assert row.get_attribute("data-id") == item["Id"]
                score = float(row.get_attribute("data-score") or "nan")
                assert row.locator("td.score").inner_text() == f"{score:.4f}"
                assert score > 0
            assert a.locator("tr.kept").first.locator("td.terms").inner_text() != "-"  # matched terms shown
            expect(a.locator("b.cache")).to_have_text("hit")  # the callback above left its answer in the cache
            expect(a.locator("details summary")).to_have_text("Not in the answer, and why")
            expect(a.locator("p.dials")).to_have_text("Retrieval dials: neighbours 1 (set by the route: neighbours)")

            b = page.locator('div.side[data-side="b"]')
            expect(b.locator("h2")).to_have_text("dify alice support")
            body_b = orjson.loads(b.locator("pre.body").inner_text())
            assert body_b["records"], body_b
            assert {r["metadata"]["path"][:4] for r in body_b["records"]} == {"ops/"}
            expect(b.locator("tr.kept")).to_have_count(len(body_b["records"]))
            assert b.locator('tr.dropped[data-reason="metadata_condition"]').count() >= 1
            expect(b.locator("p.dials")).to_have_text("Retrieval dials: neighbours 0 (the index's)")

            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "admin-try.png"), full_page=True)
            for width in (1280, 390):  # two callers' results side by side, then stacked: no horizontal scroll
                page.set_viewport_size({"width": width, "height": 860})
                assert_fits(page, f"try results at {width} px")
            page.set_viewport_size({"width": 1180, "height": 860})

            html = page.content()
            assert not any(s in html for s in SECRETS if s != ADMIN_TOKEN) and ADMIN_TOKEN not in html

            # A POST carrying the login cookie but not the form's csrf value is refused, and so is
            # one whose Origin is another site (the page's CSP forbids scripts a fetch, so the
            # browser context's own request client sends them, with its cookies).
            form = {"query": "x", "a_caller": "volcengine", "a_tenant": "acme", "a_first": "tech",
                    "a_second": "software"}
            assert page.request.post(srv.base + "/admin/try", form=form).status == 403
            assert page.request.post(srv.base + "/admin/try", form={**form, "csrf": "0" * 64}).status == 403
            csrf = page.locator('#main input[name="csrf"]').get_attribute("value") or ""
            assert len(csrf) == 64
            assert page.request.post(srv.base + "/admin/try", form={**form, "csrf": csrf},
                                     headers={"origin": "https://evil.example"}).status == 403
            assert page.request.post(srv.base + "/admin/try", form={**form, "csrf": csrf}).status == 200

            # a result links to its document's page, at its chunk
            first = a.locator("tr.kept").first.locator("a")
            href = first.get_attribute("href") or ""
            assert href.startswith("/admin/indexes/") and "#chunk-" in href, href
            first.click()
            expect(page.locator(f"section.chunk#{href.rsplit('#', 1)[1]}")).to_be_visible()
        finally:
            page.close()
    log = srv.log_path.read_text("utf-8", "replace")
    assert QUERY not in log
