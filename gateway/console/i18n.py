"""The console's language: zh-CN first, English on request, through gettext catalogs.

`_("text")` translates for the request being answered (a context variable set by `use`);
`N_("text")` marks a module-level string for extraction and is translated where shown.
Templates call the same `_` (Jinja2's i18n extension, new-style). The rules are in
docs/architecture.md, "The console's language".
"""

from __future__ import annotations

import gettext
from contextvars import ContextVar
from typing import Any

LOCALES = ("zh_CN", "en")
DEFAULT = "zh_CN"

_current: ContextVar[gettext.NullTranslations] = ContextVar("console_translations",
                                                              default=gettext.NullTranslations())


def N_(message: str) -> str:
    """Mark `message` for extraction only; returned unchanged (translate it with `_` when shown)."""
    return message


def _(message: str, **values: Any) -> str:
    """`message` in the current request's language; `values` fill `%(name)s` placeholders."""
    text = _current.get().gettext(message)
    return text % values if values else text


def ngettext(singular: str, plural: str, n: int, **values: Any) -> str:
    """The singular or plural form for `n` in the current language; `%(num)d` is `n`."""
    text = _current.get().ngettext(singular, plural, n)
    return text % {"num": n, **values}


def use(translations: gettext.NullTranslations) -> None:
    """Make `translations` the current request's language (called once per request)."""
    _current.set(translations)
