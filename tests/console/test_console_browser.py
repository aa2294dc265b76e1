"""The console's frame in a real headless Chromium: one navigation on every page, each page
fits 390 px and 1280 px with no horizontal scroll, and the keyboard alone reaches every control
with a visible focus and a distinct accessible name. One browser and one real `kbgate serve`
(Redis) for the module; several checks per page load.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.browser import (
    _browser,  # noqa: F401  (the `browser` fixture)
    assert_fits,
    assert_fits_both,
    assert_keyboard,
    log_in,
)
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, EVERYTHING, TOKEN_ALICE, client, config, tenant, write
from tests.support.harness import Server, free_port, serve

pytestmark = pytest.mark.browser

NAV = ["Overview", "Try", "Gaps", "Tasks", "Indexes", "Synonyms", "Tenants", "Deliveries", "Users"]
PAGES = ["/admin/", "/admin/try", "/admin/gaps", "/admin/tasks", "/admin/documents", "/admin/synonyms",
         "/admin/tenants", "/admin/deliveries", "/admin/users"]
LONG = "一个很长很长的二级目录名称" * 6  # a SecondLevelId with no break opportunity for Latin wrapping


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("console")
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(tmp, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-console-{port}",
                  admin_token=ADMIN_TOKEN, agent=agent, audit={"sink": "off"}, gaps={"flush_seconds": 0.1},
                  access={"sqlite_path": str(tmp / "feedback.sqlite3")})
    with serve(write(tmp / "gateway.toml", data), port=port, env=ENV) as s:
        with httpx.Client(timeout=10) as c:
            callback(c, s.base, ENV["ACME_SECRET"], query="密钥轮换")
            callback(c, s.base, ENV["ACME_SECRET"], query="火星基地的氧气配额是多少")
            callback(c, s.base, ENV["ACME_SECRET"], second=LONG, query="x")  # route_unknown, a long cell
            callback(c, s.base, "not-the-acme-secret", query="x")
        yield s


def test_every_page_shares_one_navigation_and_fits_both_widths(browser: Any, srv: Server) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 800})
    try:
        log_in(page, srv.base, ADMIN_TOKEN)
        assert page.url == srv.base + "/admin/"
        for path, label in zip(PAGES, NAV, strict=True):
            assert_fits_both(page, srv.base + path)
            nav = page.get_by_role("navigation", name="Console")
            assert nav.get_by_role("link").all_inner_texts() == NAV
            current = nav.locator('a[aria-current="page"]')
            assert current.inner_text() == label, path
            assert page.locator("h1").count() == 1 and page.locator("h1").inner_text()
            html = page.content()
            assert "<script" not in html and "<link" not in html and "http://" not in html.replace(srv.base, "")
        page.goto(srv.base + "/admin/tasks")
        assert "Not yet" in page.locator("main").inner_text()
    finally:
        page.close()


def test_wide_tables_become_cards_at_390_px(browser: Any, srv: Server) -> None:
    page = browser.new_page(viewport={"width": 390, "height": 800})
    try:
        log_in(page, srv.base, ADMIN_TOKEN)
        page.goto(srv.base + "/admin/deliveries")
        row = page.locator("table.stack tbody tr").first
        assert page.evaluate("getComputedStyle(document.querySelector('table.stack td')).display") == "grid"
        assert row.locator('td[data-label="Outcome"]').is_visible()
        assert_fits(page)
        page.set_viewport_size({"width": 1280, "height": 900})
        assert page.evaluate("getComputedStyle(document.querySelector('table.stack td')).display") == "table-cell"
        assert_fits(page)
    finally:
        page.close()


def test_the_keyboard_alone_reaches_every_control(browser: Any, srv: Server) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        log_in(page, srv.base, ADMIN_TOKEN)  # typed, then Enter
        for path in ("/admin/deliveries", "/admin/try", "/admin/gaps", "/admin/documents"):
            page.goto(srv.base + path)
            met = assert_keyboard(page)
            assert met[0]["text"] == "Skip to content", met[0]
            assert [m["text"] for m in met if m["href"].startswith("/admin") and m["text"] in NAV][:len(NAV)] == NAV
        # Move by keyboard: Tab to the Deliveries link and follow it with Enter.
        page.goto(srv.base + "/admin/")
        for _ in range(30):
            page.keyboard.press("Tab")
            if page.evaluate("document.activeElement.textContent") == "Deliveries":
                break
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url == srv.base + "/admin/deliveries"
        # Filter with the keyboard: the outcome select, then Enter submits the form.
        page.focus('select[name="outcome"]')
        page.keyboard.press("ArrowDown")  # "ok"
        page.keyboard.press("ArrowDown")  # "failed"
        page.focus('input[name="n"]')
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert "outcome=failed" in page.url
        outcomes = page.locator("td.outcome").all_inner_texts()
        assert outcomes and "ok" not in outcomes
    finally:
        page.close()
