"""The index browser and documents from the browser in a real headless Chromium (Debian's,
driven by Playwright), on a real `kbgate serve` with Redis: every page fits at 390 px and
1280 px and works with the keyboard alone; files of every supported format uploaded by keyboard,
each with its report and its facts in the list; a document disabled by keyboard, marked, counted,
and absent from a Volcengine callback; a chunk reached by its link; the editor on the text as
uploaded; a re-index by keyboard, reported."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path
from typing import Any

import httpx
import openpyxl
import pptx
import pytest

from gateway.console.links import document_url
from tests.support.browser import _browser, assert_fits_both, assert_keyboard, log_in, small_shot  # noqa: F401
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.files import docx_bytes, guide_pdf
from tests.support.harness import Server, free_port, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

IMG = ROOT / "docs" / "img" if os.environ.get("KBGATE_DOCS_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
TOP = "guide/key-rotation.md"


def _pptx() -> bytes:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "季度回顾"
    slide.placeholders[1].text = "收入同比增长 25%"
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def _xlsx() -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "价格表"
    sheet.append(["产品", "价格"])
    sheet.append(["标准版", 99])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


FILES: list[dict[str, Any]] = [
    {"name": "leave.md", "mimeType": "text/markdown", "buffer": "# 年假\n\n## 申请\n\n提前三天申请年假。\n".encode()},
    {"name": "travel.txt", "mimeType": "text/plain", "buffer": "出差报销要在一个月内提交。".encode()},
    {"name": "faq.html", "mimeType": "text/html",
     "buffer": ("<html><head><title>常见问题</title></head><body><h2>登录</h2>"
                "<p>忘记密码请联系管理员。</p></body></html>").encode()},
    {"name": "ops.rst", "mimeType": "text/x-rst",
     "buffer": "运维\n====\n\n备份\n----\n\n每天凌晨备份一次。\n".encode()},
    {"name": "deploy.pdf", "mimeType": "application/pdf", "buffer": guide_pdf()},
    {"name": "policy.docx", "mimeType": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
     "buffer": docx_bytes("报销制度", [("范围", "差旅费用按实报销。")])},
    {"name": "review.pptx", "mimeType": "application/vnd.openxmlformats-officedocument.presentationml.presentation",
     "buffer": _pptx()},
    {"name": "prices.xlsx", "mimeType": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
     "buffer": _xlsx()},
]


def _tab_to(page: Any, name: str, limit: int = 300) -> None:
    """Press Tab until the control named `name` (aria-label or text) has the focus."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        got = page.evaluate("() => { const e = document.activeElement; return e ? "
                            "(e.getAttribute('aria-label') || e.innerText || e.value || '').trim() : '' }")
        if got == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")


def _tab_to_selector(page: Any, selector: str, limit: int = 300) -> None:
    for _ in range(limit):
        page.keyboard.press("Tab")
        if page.evaluate(f"() => document.activeElement && document.activeElement.matches({selector!r})"):
            return
    raise AssertionError(f"Tab never reached {selector}")


def _open_chooser_by_space(page: Any, tries: int = 3) -> Any:
    """The file chooser Space opens on the focused file field. On a loaded machine Chromium now and
    then drops the first key press's chooser: Space is pressed again, the keyboard still alone."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for attempt in range(tries):
        try:
            with page.expect_file_chooser(timeout=10_000) as chooser:
                page.keyboard.press("Space")
            return chooser.value
        except PlaywrightTimeout:
            if attempt == tries - 1:
                raise
            _tab_to_selector(page, 'input[type="file"]')  # the focus is where it was, or found again
    raise AssertionError("unreachable")


def _server(tmp_path: Path, index: Path, redis_url: str, name: str, **more: Any) -> Server:
    """A `kbgate serve` (not started) of tenant acme's route tech/software → `index`, the admin
    token, audit off; `more`: further config tables."""
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=index, port=port, redis_url=redis_url, key_prefix=f"kbgate-{name}-{port}",
                  admin_token=ADMIN_TOKEN, audit={"sink": "off"}, **more)
    return serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV)


def test_index_browser_upload_and_disable_by_keyboard(browser: object, tmp_path: Path, private_index: Path,
                                                      redis_url: str) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    with _server(tmp_path, private_index, redis_url, "browseui", gaps={"flush_seconds": 0.1}) as srv:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            for url in ("/admin/indexes", "/admin/indexes/docs", document_url("docs", TOP, 0)):
                assert_fits_both(page, srv.base + url)
                assert_keyboard(page)
            IMG.mkdir(parents=True, exist_ok=True)

            # upload every supported format, by keyboard: Tab to the file field, Space opens the chooser
            page.goto(srv.base + "/admin/indexes/docs")
            page.bring_to_front()  # a page of a shared browser that lost focus opens no chooser
            _tab_to_selector(page, 'input[type="file"]')
            chooser = _open_chooser_by_space(page)
            chooser.set_files(FILES)
            _tab_to(page, "Upload files")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            report = page.locator("section.report")
            expect(report.locator("li.done")).to_have_count(len(FILES))
            for f in FILES:
                expect(report.locator(f'li[data-id="{f["name"]}"] .change')).to_have_text("added")
            page.screenshot(path=str(IMG / "admin-index-upload.png"))
            for width in (390, 1280):
                page.set_viewport_size({"width": width, "height": 800})
                assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), width
            page.reload()
            expect(page.locator("section.report")).to_have_count(0)  # a report is shown once
            expect(page.locator('tr[data-doc="deploy.pdf"]')).to_have_count(1)
            # each row's facts: what wrote it, its size, when, its status; older documents say "—"
            leave = page.locator('tr[data-doc="leave.md"]')
            expect(leave.locator("td.via")).to_have_text("console")
            expect(leave.locator("td.size")).to_have_text(f'{len(FILES[0]["buffer"])} B')
            expect(leave.locator("td.state")).to_have_text("served")
            expect(page.locator(f'tr[data-doc="{TOP}"] td.added')).to_have_text("—")

            # disable by keyboard: marked, counted, gone from a real Volcengine callback
            hidden_before = int(page.locator(".hidden-count").inner_text())
            _tab_to(page, f"Disable {TOP}")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            row = page.locator(f'tr[data-doc="{TOP}"]')
            expect(row).to_have_class(re.compile(r"\bdisabled\b"))
            expect(row.locator(".tag")).to_have_text("disabled")
            expect(page.locator(".hidden-count")).to_have_text(str(hidden_before + 1))
            with httpx.Client(timeout=10, headers=ENGLISH) as c:
                assert "新旧两把密钥" not in callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").text
            page.screenshot(path=str(IMG / "admin-index-disabled.png"))
            # the login cookie without the page's csrf value changes nothing
            forged = page.request.post(srv.base + "/admin/indexes/docs/visibility",
                                       form={"id": TOP, "visible": "1", "csrf": "0" * 64})
            assert forged.status == 403
            page.reload()
            expect(page.locator(f'tr[data-doc="{TOP}"] .tag')).to_have_text("disabled")

            # a chunk by its link; the edit form fits
            page.goto(srv.base + document_url("docs", "deploy.pdf", 1))
            expect(page.locator("#chunk-1")).to_be_visible()
            expect(page.locator("section.chunk")).to_have_count(2)
            assert_fits_both(page, srv.base + document_url("docs", "leave.md"))
            assert_keyboard(page)
            assert_fits_both(page, srv.base + "/admin/indexes/docs/edit?id=leave.md")
            assert_keyboard(page)
            # the editor opens the text as uploaded: its ## sub-heading is there, not rebuilt
            expect(page.locator("#doc-text")).to_have_value(FILES[0]["buffer"].decode())
            expect(page.locator("#edit-rebuilt")).to_have_count(0)
            # re-index it by keyboard from its page: reported with its chunks before and after
            page.goto(srv.base + document_url("docs", "leave.md"))
            _tab_to(page, "Re-index this document")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            expect(page.locator('section.report li[data-id="leave.md"] .change')).to_have_text("reindexed")
            expect(page.locator("#reindex-summary")).to_contain_text("1 document(s) re-indexed")
            expect(page.locator("section.chunk .hits").first).to_have_text("0 hits")
        finally:
            page.close()


def test_delete_is_confirmed_and_restored_by_keyboard(browser: object, tmp_path: Path, private_index: Path,
                                                      redis_url: str) -> None:
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    with _server(tmp_path, private_index, redis_url, "deleteui") as srv:
        page = browser.new_page(viewport={"width": 1280, "height": 800}, locale="zh-CN")  # in Chinese
        index_url = srv.base + "/admin/indexes/docs"
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            page.goto(index_url)
            _tab_to(page, f"删除 {TOP}")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            # the question: nothing is deleted yet; the page fits and every control is reached by Tab
            expect(page.locator("h1")).to_have_text(f"删除 {TOP}？")
            expect(page.locator("#delete-what")).to_contain_text("可在本知识库页面")
            confirm_url = page.url
            assert_fits_both(page, confirm_url)
            met = {m["text"] for m in assert_keyboard(page)}
            assert {f"是，删除 {TOP}", f"不，保留 {TOP}"} <= met
            small_shot(page, IMG / "admin-delete-confirm.png")
            _tab_to(page, f"不，保留 {TOP}")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert httpx.get(srv.base + document_url("docs", TOP, json=True), timeout=10,
                             headers={"authorization": f"Bearer {ADMIN_TOKEN}"}).status_code == 200

            page.goto(confirm_url)
            _tab_to(page, f"是，删除 {TOP}")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            expect(page.locator(f'section.report li[data-id="{TOP}"] .change')).to_have_text("已删除")
            expect(page.locator(f'tr[data-doc="{TOP}"]')).to_have_count(0)
            expect(page.locator(f'tr[data-deleted="{TOP}"]')).to_have_count(1)
            assert_fits_both(page, index_url)
            restore = next(m["text"] for m in assert_keyboard(page)
                           if m["text"].startswith("恢复 ") and m["text"].endswith(f"删除的 {TOP}"))
            page.locator("#deleted-h").scroll_into_view_if_needed()
            small_shot(page, IMG / "admin-deleted.png")
            page.goto(index_url)
            _tab_to(page, restore)
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert page.url == srv.base + document_url("docs", TOP)
            expect(page.locator(f'section.report li[data-id="{TOP}"] .change')).to_have_text("已恢复")
            with httpx.Client(timeout=10, headers=ENGLISH) as c:
                assert "新旧两把密钥" in callback(c, srv.base, ENV["ACME_SECRET"], query="密钥轮换").text
        finally:
            page.close()


def test_an_admin_creates_an_index_by_keyboard(browser: object, tmp_path: Path, private_index: Path,
                                               redis_url: str) -> None:
    """Uploads never create an index: the Indexes page's Create index form does, by keyboard,
    and the page fits at 390 and 1280 px with it."""
    from playwright.sync_api import Browser, expect

    assert isinstance(browser, Browser)
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=private_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-create-{port}",
                  admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            assert_fits_both(page, srv.base + "/admin/indexes")
            page.goto(srv.base + "/admin/indexes")
            _tab_to_selector(page, "#new-index")
            page.keyboard.type("handbook")
            with page.expect_navigation():
                page.keyboard.press("Enter")
            assert page.url == srv.base + "/admin/indexes/handbook"
            assert (private_index / "handbook" / "meta.json").is_file()
            page.goto(srv.base + "/admin/indexes")
            expect(page.locator('tr[data-index="handbook"]')).to_have_count(1)
        finally:
            page.close()
