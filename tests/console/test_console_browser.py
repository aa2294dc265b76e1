"""The console's frame in a real headless Chromium: one navigation on every page, each page
fits 390 px and 1280 px with no horizontal scroll, and the keyboard alone reaches every control
with a visible focus and a distinct accessible name. One browser and one real `kbgate serve`
(Redis) for the module; several checks per page load.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.console.credentials import hash_credential, new_credential
from tests.support.browser import (
    _browser,  # noqa: F401  (the `browser` fixture)
    assert_fits,
    assert_fits_both,
    assert_headers_whole,
    assert_keyboard,
    logged_in,
)
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, EVERYTHING, TOKEN_ALICE, client, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import Server, free_port, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

NAV = ["Overview", "Try", "Gaps", "Tasks", "Indexes", "Synonyms", "Tenants", "Deliveries", "Users"]
PAGES = ["/admin/", "/admin/try", "/admin/gaps", "/admin/tasks", "/admin/documents", "/admin/synonyms",
         "/admin/tenants", "/admin/deliveries", "/admin/users"]
OWNER = new_credential()
ARTIFACTS = ROOT / "test-artifacts"
LONG = "一个很长很长的二级目录名称" * 6  # a SecondLevelId with no break opportunity for Latin wrapping


def wait_for_gaps(base: str, n: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        got = httpx.get(base + "/admin/gaps.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        if len(got.json()["groups"]) >= n:
            return
        time.sleep(0.1)
    raise AssertionError("the gaps were not recorded")


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("console")
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}, "other": {"index": "kb"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support", "other"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(tmp, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-console-{port}",
                  admin_token=ADMIN_TOKEN, agent=agent, audit={"sink": "off"}, gaps={"flush_seconds": 0.1},
                  access={"sqlite_path": str(tmp / "feedback.sqlite3")})
    data["admin"]["users"] = {"otto": {"role": "owner", "indexes": ["docs"], "credential": hash_credential(OWNER)}}
    with serve(write(tmp / "gateway.toml", data), port=port, env=ENV) as s:
        with httpx.Client(timeout=10, headers=ENGLISH) as c:
            callback(c, s.base, ENV["ACME_SECRET"], query="密钥轮换")
            callback(c, s.base, ENV["ACME_SECRET"], query="火星基地的氧气配额是多少")
            callback(c, s.base, ENV["ACME_SECRET"], second=LONG, query="x")  # route_unknown, a long cell
            callback(c, s.base, "not-the-acme-secret", query="x")
            for route, q in (("support", "火星基地的氧气配额是多少"), ("other", "木星探测器的燃料配额是多少")):
                c.post(s.base + "/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                       json={"knowledge_id": route, "query": q,
                             "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
        wait_for_gaps(s.base, 2)
        yield s


def test_every_page_shares_one_navigation_and_fits_both_widths(browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 390, "height": 800}) as page:
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
        for path in ("/admin/tasks", "/admin/synonyms"):  # every navigation entry is a page now
            page.goto(srv.base + path)
            assert "Not yet" not in page.locator("main").inner_text()


def test_in_chinese_the_chart_reads_at_390_px_headers_stay_whole_and_delete_keeps_its_line(
        browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 390, "height": 800}, locale="zh-CN") as page:
        assert page.locator("h1").inner_text() == "概览" and page.get_attribute("html", "lang") == "zh-CN"
        chart = page.locator("img.chart")
        chart.scroll_into_view_if_needed()
        page.wait_for_function("document.querySelector('img.chart').complete")
        src, natural, shown = chart.evaluate("i => [i.currentSrc, i.naturalWidth, i.clientWidth]")
        assert src.endswith("/admin/overview/chart.svg?narrow=1"), src  # the phone's drawing
        assert shown / natural > 0.85, (shown, natural)  # its 12 px labels stay over 10 px on screen
        page.goto(srv.base + "/admin/indexes/docs")
        row = page.locator("table.docs tbody tr").first
        tops = [row.locator(sel).first.bounding_box()["y"] for sel in ("td.actions button", "td.actions a.button")]
        tops.append(row.locator("td.actions button").last.bounding_box()["y"])
        assert max(tops) - min(tops) < 2, tops  # 停用, 重新索引 and 删除… side by side
        page.set_viewport_size({"width": 1280, "height": 800})
        for path in ("/admin/gaps", "/admin/indexes/docs", "/admin/deliveries", "/admin/tasks", "/admin/"):
            page.goto(srv.base + path)
            assert_headers_whole(page)
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 1280, "height": 800}) as page:  # and in English
        page.goto(srv.base + "/admin/gaps")
        assert page.locator("table.gaps th").first.inner_text() == "Group"
        assert_headers_whole(page)


def test_wide_tables_become_cards_at_390_px(browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 390, "height": 800}) as page:
        page.goto(srv.base + "/admin/deliveries")
        row = page.locator("table.stack tbody tr").first
        assert page.evaluate("getComputedStyle(document.querySelector('table.stack td')).display") == "grid"
        assert row.locator('td[data-label="Outcome"]').is_visible()
        assert_fits(page)
        page.goto(srv.base + "/admin/users")  # a 64-character name in a heading, a checkbox label, a list
        page.evaluate("""n => { document.querySelector('h1').textContent = n;
            const box = document.createElement('input'); box.type = 'checkbox';
            const l = document.createElement('label'); l.append(box, ' ' + n);
            const li = document.createElement('li'); li.textContent = n.replace(/x/g, '.md,');
            const ul = document.createElement('ul'); ul.append(li);
            document.querySelector('main').append(l, ul); }""", "x" * 64)
        assert_fits(page, "/admin/users with 64-character names")
        page.set_viewport_size({"width": 1280, "height": 900})
        assert page.evaluate("getComputedStyle(document.querySelector('table.stack td')).display") == "table-cell"
        assert_fits(page)


def test_the_keyboard_alone_reaches_every_control(browser: Any, srv: Server) -> None:
    # typed, then Enter
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 1280, "height": 900}) as page:
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


def test_a_wrong_address_is_a_console_page_left_by_the_keyboard(browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 1280, "height": 900}) as page:
        assert_fits_both(page, srv.base + "/admin/no-such-page")
        assert page.locator("h1").inner_text() == "Page not found"
        assert page.get_by_role("navigation", name="Console").get_by_role("link").all_inner_texts() == NAV
        met = assert_keyboard(page)
        assert met[-1]["href"] == "/admin/" and met[-1]["text"] == "Back", met
        page.focus('main a[href="/admin/"]')
        with page.expect_navigation():
            page.keyboard.press("Enter")
        assert page.url == srv.base + "/admin/"


def test_an_owner_logs_in_as_themself_and_sees_only_their_gaps(browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, OWNER, user="otto", viewport={"width": 390, "height": 800}) as page:
        assert page.url == srv.base + "/admin/"
        assert "otto (owner of docs)" in page.locator("header").inner_text()
        page.goto(srv.base + "/admin/gaps")
        assert page.locator("tr[data-group]").count() == 1  # the docs gap; the kb gap is not theirs
        assert "the indexes you own" in page.locator("main").inner_text()
        assert page.get_by_role("button", name="File improvement task").count() == 1
        assert_fits(page)
        # A page their role does not allow: a clear refusal in the layout, with the navigation.
        r = page.goto(srv.base + "/admin/users")
        assert r is not None and r.status == 403
        assert page.locator("h1").inner_text() == "Not allowed"
        assert "owner of docs" in page.get_by_role("alert").inner_text()
        assert page.get_by_role("navigation", name="Console").is_visible()
        assert_fits(page)
        page.set_viewport_size({"width": 1280, "height": 900})
        assert_fits(page)
        # A wrong credential: the form again, no session (only the login form's own CSRF cookie).
        page.context.clear_cookies()
        page.goto(srv.base + "/admin/")
        page.fill('input[name="user"]', "otto")
        page.fill('input[name="token"]', ADMIN_TOKEN)
        page.keyboard.press("Enter")
        page.wait_for_load_state()
        assert "do not match" in page.get_by_role("alert").inner_text()
        assert [c["name"] for c in page.context.cookies()] == ["kbgate_login"]


def test_the_overview_shows_routes_chart_keys_and_refusals(browser: Any, srv: Server) -> None:
    with logged_in(browser, srv.base, ADMIN_TOKEN, viewport={"width": 1280, "height": 900}) as page:
        o = httpx.get(srv.base + "/admin/overview.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).json()
        cards = page.locator("section.route")
        assert sorted(cards.evaluate_all("els => els.map(e => e.dataset.route)")) == \
            sorted(r["id"] for r in o["routes"]) == ["acme/tech/software", "other", "support"]
        docs = page.locator('section.route[data-route="support"]')
        assert docs.locator("dd.documents").inner_text() == str(o["indexes"]["docs"]["documents"])
        assert docs.locator("dd.commit").inner_text() == o["routes"][[r["id"] for r in o["routes"]].index("support")][
            "commit"]
        chart = page.locator("img.chart")
        assert chart.evaluate("img => img.complete && img.naturalWidth > 0")  # the SVG loaded under the CSP
        assert "Questions per day" in (chart.get_attribute("alt") or "")
        assert page.locator('tr[data-reason="signature_mismatch"] td.num').inner_text() == "1"
        assert page.locator('tr[data-key="acme/acme-2026-11"] td.last-used').inner_text().endswith("UTC")
        assert "火星" not in page.content() and "密钥轮换" not in page.content()  # no question text
        page.locator("details summary").click()
        assert page.locator("table.questions-table tbody tr").count() == 1  # today
        assert_keyboard(page)
        page.set_viewport_size({"width": 390, "height": 800})
        assert_fits(page, "overview at 390 px")
        assert chart.evaluate("img => img.getBoundingClientRect().width") <= 390
        page.screenshot(path=str(ARTIFACTS / "console-overview-390.png"), full_page=True)
