"""Console pages in a real headless Chromium (Debian's, driven by Playwright; never `playwright install`).

Rationale: docs/design-notes.md, "tests/support/browser.py".
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
WIDTHS = (390, 1280)


@pytest.fixture(name="browser", scope="module")
def _browser() -> Iterator[Any]:
    """One headless Chromium for the whole test module."""
    if not CHROMIUM.exists():
        pytest.fail("/usr/bin/chromium is missing: run `bash tests/ensure-tools.sh` as root "
                    "(apt-get install chromium fonts-wqy-microhei); never `playwright install`")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


def log_in(page: Any, base: str, token: str, user: str = "") -> None:
    """Log in through the form with the keyboard alone (the token field has the focus)."""
    page.goto(base + "/admin/")
    if user:
        page.fill('input[name="user"]', user)
    page.focus('input[name="token"]')
    page.keyboard.type(token)
    with page.expect_navigation():
        page.keyboard.press("Enter")


@contextmanager
def logged_in(browser: Any, base: str, token: str, user: str = "", **page_args: Any) -> Iterator[Any]:
    """A new page (`page_args`: viewport, locale …) logged in with the keyboard (`log_in`),
    closed on exit."""
    page = browser.new_page(**page_args)
    try:
        log_in(page, base, token, user)
        yield page
    finally:
        page.close()


def shot_of(page: Any, element: Any, path: Path, *, above: int = 50, below: int = 60, most: int = 480) -> None:
    """A full-page `small_shot` at 1280 px clipped to `element` (a locator): `above` px over it,
    `below` px more than its height, at most `most` px high."""
    box = element.bounding_box()
    small_shot(page, path, clip={"x": 0, "y": max(0, box["y"] - above), "width": 1280,
                                 "height": min(box["height"] + below, most)}, full_page=True)


def assert_fits(page: Any, label: str = "") -> None:
    """The page scrolls no wider than the viewport at its current width."""
    got = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
    assert got[0] <= got[1], f"{label or page.url}: {got[0]} px wide in a {got[1]} px viewport"


def assert_fits_both(page: Any, url: str) -> None:
    """`url` fits at 390 px and at 1280 px (the viewport is left at 1280 px)."""
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(url)
        assert_fits(page, f"{url} at {width} px")


FOCUS_JS = """() => {
  const el = document.activeElement;
  if (!el || el === document.body) return null;
  const cs = getComputedStyle(el);
  const ring = cs.outlineStyle !== 'none' && parseFloat(cs.outlineWidth) >= 2;
  return {tag: el.tagName.toLowerCase(), name: el.getAttribute('name') || '', href: el.getAttribute('href') || '',
          text: (el.getAttribute('aria-label') || el.innerText || el.value || '').trim().slice(0, 80), ring};
}"""

CONTROLS_JS = """() => Array.from(document.querySelectorAll(
    'a[href], button, input:not([type=hidden]), select, textarea, summary'))
  .filter(el => !el.disabled && el.offsetParent !== null)
  .map(el => {
    let label = el.getAttribute('aria-label');
    if (!label && el.labels && el.labels.length) {
      const copy = el.labels[0].cloneNode(true);
      copy.querySelectorAll('input, select, textarea, datalist').forEach(c => c.remove());
      label = copy.textContent;
    }
    if (!label) label = el.innerText || el.value || el.getAttribute('name') || '';
    const role = el.tagName === 'A' ? 'link' : el.tagName === 'BUTTON' || el.type === 'submit' ? 'button' : 'field';
    return role + ':' + label.trim().replace(/\\s+/g, ' ');
  })"""


def tab_through(page: Any, limit: int = 200) -> list[dict[str, Any]]:
    """The focused elements met pressing Tab from the top of the (reloaded) page until focus comes round
    again (at most `limit` presses). Each: tag, name, href, text, ring (a visible outline)."""
    page.reload()  # a fresh load: Tab starts at the top of the document (use on GET pages)
    seen: list[dict[str, Any]] = []
    for _ in range(limit):
        page.keyboard.press("Tab")
        got = page.evaluate(FOCUS_JS)
        if got is None or (seen and got == seen[0]):
            break
        seen.append(got)
    return seen


def assert_keyboard(page: Any) -> list[dict[str, Any]]:
    """Tab reaches every visible control of the page, each shows a focus ring, and no two
    controls share an accessible name. Returns what Tab met."""
    met = tab_through(page)
    controls = page.evaluate(CONTROLS_JS)
    assert len(met) >= len(controls), (met, controls)
    assert all(m["ring"] for m in met), [m for m in met if not m["ring"]]
    dupes = {c for c in controls if controls.count(c) > 1}
    assert not dupes, f"controls sharing an accessible name: {sorted(dupes)}"
    return met


BROKEN_HEADERS_JS = """() => Array.from(document.querySelectorAll('th')).filter(th => th.offsetParent !== null)
  .filter(th => {
    const cs = getComputedStyle(th);
    const room = th.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
    const probe = document.createElement('span');
    probe.style.cssText = 'position:absolute;visibility:hidden;white-space:nowrap';
    probe.style.font = cs.font;
    document.body.appendChild(probe);
    const broken = th.innerText.split(/\\s+/).filter(Boolean).some(w => {
      probe.textContent = w; return probe.getBoundingClientRect().width > room + 0.5; });
    probe.remove();
    return broken;
  }).map(th => th.innerText)"""


def assert_headers_whole(page: Any) -> None:
    """No visible table header of the page is narrower than one of its words (so none breaks
    inside a word, as "Grou p" or "可恢 复至" would)."""
    broken = page.evaluate(BROKEN_HEADERS_JS)
    assert not broken, f"{page.url}: headers broken inside a word: {broken}"


def small_shot(page: Any, path: Path, **kw: Any) -> None:
    """A screenshot of the viewport (or `clip`) at `path`, quantized to 64 colours with Pillow so
    that a page for docs/ is a few tens of KB (asserted under 90 KB)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path), **kw)
    with Image.open(path) as shot:
        small = shot.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    assert path.stat().st_size < 90_000, path
