"""Characters a reader does not see, and the rules built on them (what looks empty
is empty, what looks like `config/x` is `config/x`, an identity holds no hidden character).

Rationale: docs/design-notes.md, "indexes/invisible.py".
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["FOLDED_OUT", "FORMAT_RANGES", "HANGUL_FILLERS", "INVISIBLE_CLASS", "SEPARATOR_RANGES", "blank",
           "hidden_character", "name_problem", "readable_name", "shown"]

FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001),
    (0xE0020, 0xE007F))
"""Every format character (category Cf), as inclusive code point ranges."""
SEPARATOR_RANGES: tuple[tuple[int, int], ...] = (
    (0x0020, 0x0020), (0x00A0, 0x00A0), (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029),
    (0x202F, 0x202F), (0x205F, 0x205F), (0x3000, 0x3000))
"""Every separator (categories Zs, Zl, Zp), as inclusive code point ranges."""
CONTROL_RANGES: tuple[tuple[int, int], ...] = ((0x0000, 0x001F), (0x007F, 0x009F))
HANGUL_FILLERS = "\u115f\u1160\u3164\uffa0"
"""Hangul choseong and jungseong fillers, the Hangul filler and its half-width form."""


def _class(ranges: tuple[tuple[int, int], ...]) -> str:
    # literal characters: none of these is a class metacharacter (] \ ^ -), and Tantivy's
    # regex syntax refuses some escapes Python writes (`\ `)
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


FOLDED_OUT = "".join(chr(c) for a, b in FORMAT_RANGES for c in range(a, b + 1)) + HANGUL_FILLERS
"""Removed from indexed text and queries alike (`indexes.analysis.normalize`)."""
INVISIBLE_CLASS = _class(CONTROL_RANGES + FORMAT_RANGES + SEPARATOR_RANGES) + HANGUL_FILLERS
"""The body of a regex character class of every invisible character (Python `re` and Tantivy's
regex syntax alike: literal characters and ranges only)."""

_BLANK = re.compile(f"[\\s{INVISIBLE_CLASS}]*")
_NONCHAR = "\ufdd0-\ufdef\ufffe\uffff" + "".join(
    f"{chr(p * 0x10000 + 0xFFFE)}{chr(p * 0x10000 + 0xFFFF)}" for p in range(1, 17))
_NAME_BAD = re.compile(f"[{_class(CONTROL_RANGES + FORMAT_RANGES)}{_NONCHAR}\ud800-\udfff]")
_FORMAT = _class(FORMAT_RANGES)
_HIDDEN_LINE = re.compile(f"[\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029{_FORMAT}{_NONCHAR}\\ud800-\\udfff]")
_HIDDEN_PAGE = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f\\u2028\\u2029{_FORMAT}{_NONCHAR}"
                          "\\ud800-\\udfff]")
_UNREAD = dict.fromkeys(c for a, b in CONTROL_RANGES + FORMAT_RANGES for c in range(a, b + 1)) | dict.fromkeys(
    map(ord, HANGUL_FILLERS))


def blank(text: str) -> bool:
    """Does `text` show nothing: only separators (Z*, and Python's whitespace), format (Cf) and
    control (Cc) characters and Hangul fillers? Never raises."""
    return _BLANK.fullmatch(text) is not None


def hidden_character(text: str, keep: str = "") -> tuple[int, str] | None:
    """The first character of `text` that `name_problem` refuses, other than those in `keep`
    (e.g. a tab), as (its position counted from 1, the character); None when there is none."""
    for bad in _NAME_BAD.finditer(text):
        if bad.group() not in keep:
            return bad.start() + 1, bad.group()
    return None


def name_problem(name: str) -> str | None:
    """Why `name` (a document id, path or dataset name) cannot name a document, or None when it
    can: it holds a control character (ESC, a line break, a tab...), a format character
    (zero-width, bidi override U+202E, soft hyphen...), a non-character or a lone surrogate.
    The reason names the first such character by its code point, never the text. Never raises."""
    bad = _NAME_BAD.search(name)
    if bad is None:
        return None
    c = bad.group()
    kind = {"Cc": "a control character", "Cf": "a format (invisible) character"}.get(
        unicodedata.category(c), "a non-character")
    return f"holds {kind} (U+{ord(c):04X} at character {bad.start() + 1})"


def readable_name(name: str) -> str:
    """`name` as a person reads it (module doc): what the never-readable trees are matched on."""
    return unicodedata.normalize("NFKC", name.translate(_UNREAD)).lstrip()


def _escape(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp < 0x100 and cp != 0xAD else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def shown(text: str, lines: bool = False) -> str:
    """`text` with every character an operator would not see written as a visible escape (module
    doc); `text` itself when it holds none. lines: keep tab, line feed and carriage return (a
    page); else one report line. Never raises."""
    hidden = _HIDDEN_PAGE if lines else _HIDDEN_LINE
    return hidden.sub(_escape, text) if hidden.search(text) else text
