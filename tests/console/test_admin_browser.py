"""The /admin/ deliveries page in a real headless Chromium (Debian's, driven by Playwright).

A real `kbgate serve` (Redis-backed record) on a free port receives signed callbacks; the
browser logs in through the form, sees the delivery just sent, filters by tenant and
outcome, and a screenshot is written to test-artifacts/ (gitignored, never committed).
"""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.support.browser import _browser  # noqa: F401  (the `browser` fixture: one Chromium per module)
from tests.support.callbacks import body, signed
from tests.support.configs import ADMIN_TOKEN, ENV, SECRET_ACME, SECRET_BETA, SECRETS, two_tenants
from tests.support.harness import serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

ARTIFACTS = ROOT / "test-artifacts"


def _send(url: str, tenant: str, secret: str, **kw: str) -> httpx.Response:
    raw = body(**kw)
    return httpx.post(f"{url}/volcengine/{tenant}", content=raw, headers=signed(secret, raw), timeout=10)


def _wait_recorded(url: str, request_id: str) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        r = httpx.get(url + "/admin/deliveries.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        if any(d["request_id"] == request_id for d in r.json()["deliveries"]):
            return
        time.sleep(0.05)
    raise AssertionError(f"delivery {request_id} was not recorded")


def test_admin_page_lists_a_delivery_just_sent(browser: object, tmp_path: Path, docs_index: Path, redis_url: str,
                                               key_prefix: str) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    cfg = two_tenants(tmp_path, docs_index, redis_url=redis_url, key_prefix=key_prefix)
    with serve(cfg, env=ENV) as srv:
        ok = _send(srv.url, "acme", SECRET_ACME)
        bad = _send(srv.url, "acme", "not-the-acme-secret")
        beta = _send(srv.url, "beta", SECRET_BETA, first="产品", second="文档")
        assert (ok.status_code, bad.status_code, beta.status_code) == (200, 401, 200)
        for r in (ok, bad, beta):
            _wait_recorded(srv.url, r.headers["x-request-id"])

        page = browser.new_page(viewport={"width": 1400, "height": 900})
        try:
            page.goto(srv.url + "/admin/")
            expect(page.locator('input[name="token"]')).to_be_visible()
            page.fill('input[name="token"]', ADMIN_TOKEN)
            page.click('button[type="submit"]')
            page.wait_for_url(srv.url + "/admin/")
            page.get_by_role("navigation", name="Console").get_by_role("link", name="Deliveries").click()
            page.wait_for_url(srv.url + "/admin/deliveries")
            expect(page.locator("h1")).to_have_text("kbgate: recent deliveries")

            row = page.locator(f'tr[data-request-id="{ok.headers["x-request-id"]}"]')
            expect(row).to_be_visible()
            cells = row.locator("td").all_inner_texts()
            assert cells[1:6] == ["acme", "tech", "software", "ok", "0"], cells
            assert cells[8] == "acme-2026-11"
            bad_row = page.locator(f'tr[data-request-id="{bad.headers["x-request-id"]}"]')
            expect(bad_row.locator("td.outcome")).to_have_text("signature_mismatch")
            expect(bad_row.locator("td.ret")).to_have_text("40105")
            expect(page.locator('section[data-tenant="beta"] td', has_text="产品")).to_be_visible()
            cookies = page.context.cookies()
            assert sorted((c["name"], c["httpOnly"], c["sameSite"]) for c in cookies) == [
                ("kbgate_admin", True, "Strict"), ("kbgate_device", True, "Strict"), ("kbgate_login", True, "Strict")]
            assert page.evaluate("document.cookie") == ""  # HttpOnly: not readable by scripts

            ARTIFACTS.mkdir(exist_ok=True)
            shot = ARTIFACTS / "admin-deliveries.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000

            # Filter through the form: tenant acme, failures only.
            page.select_option('select[name="tenant"]', "acme")
            page.select_option('select[name="outcome"]', "failed")
            page.click('form.filters button[type="submit"]')
            page.wait_for_url("**/admin/deliveries?tenant=acme&outcome=failed*")
            expect(page.locator("tbody tr")).to_have_count(1)
            expect(page.locator("tbody tr td.outcome")).to_have_text("signature_mismatch")
            expect(page.locator('section[data-tenant="beta"]')).to_have_count(0)
            page.screenshot(path=str(ARTIFACTS / "admin-deliveries-filtered.png"), full_page=True)

            html = page.content()
            assert not any(s in html for s in SECRETS)
            assert "密钥轮换" not in html  # the query text stays hidden

            page.click('text="Log out"')
            expect(page.locator('input[name="token"]')).to_be_visible()
        finally:
            page.close()
