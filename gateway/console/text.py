"""Text shown in a console page: control, format and non-characters made visible.

Rationale: docs/design-notes.md, "gateway/console/text.py".
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
