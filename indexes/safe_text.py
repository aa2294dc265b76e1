"""What a document may carry to a caller: text without control characters, bounded titles,
page URLs that are http(s) ("nothing unchecked reaches a caller").

Rationale: docs/design-notes.md, "indexes/safe_text.py".
"""

from __future__ import annotations

import dataclasses
import re
from urllib.parse import urljoin, urlsplit

from ada_url import URL

from .types import Hit, StoredDocument

__all__ = ["MAX_TITLE_CHARS", "MAX_URL_CHARS", "clean_hit", "clean_stored", "clean_text", "clean_title",
           "resolve_url", "url_problem"]

MAX_TITLE_CHARS = 256
"""Longest title kept and served, in characters: the longest title of the TiDB docs-cn tree is
under 100 characters, of cmrc2018 under 40; 256 leaves room for long English titles."""
MAX_URL_CHARS = 2048
"""Longest page URL kept and served (the de-facto browser and CDN limit)."""

_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_]?)")
_NONCHAR = "\ufdd0-\ufdef\ufffe\uffff" + "".join(
    f"{chr(p * 0x10000 + 0xFFFE)}{chr(p * 0x10000 + 0xFFFF)}" for p in range(1, 17))
_BAD = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f{_NONCHAR}]")
# The scan every served text goes through: one BMP class and any astral character (a class of
# single astral code points scans ~10x slower); a text it finds is checked with _BAD.
_MAYBE_BAD = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\ufdd0-\\ufdef\\ufffe\\uffff"
                        "\\U00010000-\\U0010ffff]")
_TITLE_BAD = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f{_NONCHAR}]|\\s\\s")
_SPACE = re.compile(r"\s+")
_URL_BAD = re.compile(r"[\s\x00-\x1f\x7f-\x9f]")
# ASCII that RFC 3986 allows nowhere in a URL (section 2: only unreserved, reserved and '%');
# non-ASCII stays (IRIs: Chinese paths are sent as is)
_URL_UNSAFE = re.compile(r'["<>\\^`{|}]')
_HTTP = re.compile(r"(?i)https?://")


def _strip(text: str) -> str:
    """`text` without escape sequences (whole), then without any other `_BAD` character."""
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    return _BAD.sub("", text)


def clean_text(text: str) -> str:
    """`text` without control characters, escape sequences and non-characters (module doc);
    tab, line feed and carriage return kept. Same length or shorter; `text` itself when clean."""
    if _MAYBE_BAD.search(text) is None:
        return text
    cleaned = _strip(text)
    return text if cleaned == text else cleaned


def clean_title(title: str) -> str:
    """A title as kept and served: `clean_text`, whitespace runs made one space, stripped, at
    most MAX_TITLE_CHARS characters ('…' ends a cut one). `title` itself when already so."""
    if len(title) <= MAX_TITLE_CHARS and _TITLE_BAD.search(title) is None and title == title.strip():
        return title
    text = _SPACE.sub(" ", _strip(title)).strip()
    return text if len(text) <= MAX_TITLE_CHARS else text[: MAX_TITLE_CHARS - 1].rstrip() + "…"


def url_problem(url: str) -> str | None:
    """Why `url` may not be served as a page URL, or None when it may (module doc: http(s), a
    host and port the WHATWG parser accepts, no userinfo, no whitespace, control character or
    `"<>\\^`{|}`, at most MAX_URL_CHARS characters). Never raises."""
    if len(url) > MAX_URL_CHARS:
        return f"is longer than {MAX_URL_CHARS} characters"
    if _URL_BAD.search(url):
        return "holds whitespace or a control character"
    try:
        parts = urlsplit(url)
    except ValueError:
        return "is not a URL"
    if parts.scheme.lower() not in ("http", "https"):
        return "is not an http(s) URL" if parts.scheme else "is relative (give --url-base to resolve it)"
    if _HTTP.match(url) is None or not parts.netloc:
        return "has no host"
    if "@" in parts.netloc:
        return "holds userinfo (a user or password before '@')"
    if (bad := _URL_UNSAFE.search(url)) is not None:
        return f"holds {bad.group()!r}, which a URL may not hold unencoded (RFC 3986)"
    try:
        parsed = URL(url)
    except ValueError:
        return "has an invalid host or port"
    if not parsed.hostname or parsed.port == "0":
        return "has an invalid host or port"
    return None


def resolve_url(url: str, base: str | None) -> str:
    """`url` resolved against `base` when `url` is relative (no scheme) and a base is given;
    else `url` stripped. The result still needs `url_problem`."""
    url = url.strip()
    if base and not urlsplit(url).scheme:
        return urljoin(base, url)
    return url


def clean_hit(hit: Hit) -> Hit:
    """`hit` as a wing may show it: title (`clean_title`), summary and content (`clean_text`),
    url and cover image dropped unless their URL is servable (`url_problem`). The same Hit when
    nothing changes."""
    title, summary, content = clean_title(hit.title), clean_text(hit.summary), clean_text(hit.content)
    url = hit.url if hit.url is None or url_problem(hit.url) is None else None
    cover = hit.cover_image if hit.cover_image is None or url_problem(hit.cover_image.url) is None else None
    if (title is hit.title and summary is hit.summary and content is hit.content and url is hit.url
            and cover is hit.cover_image):
        return hit
    return dataclasses.replace(hit, title=title, summary=summary, content=content, url=url, cover_image=cover)


def clean_stored(doc: StoredDocument) -> StoredDocument:
    """`doc` as a wing may show it, like `clean_hit` (title, text, summary, url)."""
    title, text = clean_title(doc.title), clean_text(doc.text)
    summary = None if doc.summary is None else clean_text(doc.summary)
    url = doc.url if doc.url is None or url_problem(doc.url) is None else None
    if title is doc.title and text is doc.text and summary is doc.summary and url is doc.url:
        return doc
    return dataclasses.replace(doc, title=title, text=text, summary=summary, url=url)
