"""Text shown in a console page: control, format and non-characters made visible.

Autoescaping (Jinja2) makes a value safe HTML; this makes it honest: every control character
but tab and line breaks, every format character (zero-width, bidi overrides such as U+202E)
and non-character is written as a visible escape ('\\x1b', '\\u202e'), so a caller's
SecondLevelId cannot put raw ESC bytes in a page nor reorder what an operator reads.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup

from indexes.invisible import FOLDED_OUT, HANGUL_FILLERS

_HIDDEN = re.compile(f"[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f-\\x9f{FOLDED_OUT[:-len(HANGUL_FILLERS)]}"
                     "\\ufdd0-\\ufdef\\ufffe\\uffff]")


def _escape(m: re.Match[str]) -> str:
    cp = ord(m.group())
    return f"\\x{cp:02x}" if cp < 0x100 and cp != 0xAD else f"\\u{cp:04x}" if cp < 0x10000 else f"\\U{cp:08x}"


def visible(value: Any) -> Any:
    """`value` with hidden characters written as escapes when it is a plain str ('a\\x1bb' →
    'a\\\\x1bb'); anything else (numbers, Markup from a template) unchanged. Jinja2's
    `finalize`: it runs before autoescaping."""
    if isinstance(value, str) and not isinstance(value, Markup) and _HIDDEN.search(value):
        return _HIDDEN.sub(_escape, value)
    return value
