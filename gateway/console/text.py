"""Text shown in a console page: control, format and non-characters made visible.

Autoescaping (Jinja2) makes a value safe HTML; this makes it honest: every control character
but tab and line breaks, every format character (zero-width, bidi overrides such as U+202E)
and non-character is written as a visible escape ('\\x1b', '\\u202e'; `indexes.invisible.shown`,
as every CLI report line), so a caller's SecondLevelId cannot put raw ESC bytes in a page nor
reorder what an operator reads.
"""

from __future__ import annotations

from typing import Any

from markupsafe import Markup

from indexes.invisible import shown


def visible(value: Any) -> Any:
    """`value` with hidden characters written as escapes when it is a plain str ('a\\x1bb' →
    'a\\\\x1bb'); anything else (numbers, Markup from a template) unchanged. Jinja2's
    `finalize`: it runs before autoescaping."""
    if isinstance(value, str) and not isinstance(value, Markup):
        return shown(value, lines=True)
    return value
