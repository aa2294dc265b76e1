"""The console's language: zh-CN first, English on request, through gettext catalogs.

Rationale: docs/design-notes.md, "gateway/console/i18n.py".
"""

from __future__ import annotations

import gettext
import io
from contextvars import ContextVar
from functools import cache
from pathlib import Path
from typing import Any

LOCALES = ("zh_CN", "en")
DEFAULT = "zh_CN"
TAGS = {"zh_CN": "zh-CN", "en": "en"}  # BCP 47, for <html lang> and the language cookie
CATALOGS = Path(__file__).with_name("locale")

# Outside a console request (the CLI, a unit test, a log line) the msgids themselves: English.
_current: ContextVar[str] = ContextVar("console_locale", default="en")


@cache
def translations(locale: str) -> gettext.NullTranslations:
    """The catalog of `locale` (one of LOCALES), read from its .po file once; the msgid
    itself for an entry without a translation. Raises KeyError for another locale."""
    from babel.messages.mofile import write_mo  # only where a page is answered: `kbgate try` stays light
    from babel.messages.pofile import read_po

    if locale not in LOCALES:
        raise KeyError(locale)
    with (CATALOGS / locale / "LC_MESSAGES" / "messages.po").open("rb") as f:
        catalog = read_po(f, locale=locale)
    buf = io.BytesIO()
    write_mo(buf, catalog)  # gettext reads the compiled form; it never touches the disk
    buf.seek(0)
    return gettext.GNUTranslations(buf)


def N_(message: str) -> str:
    """Mark `message` for extraction only; returned unchanged (translate it with `_` when shown)."""
    return message


def _(message: str, **values: Any) -> str:
    """`message` in the current request's language; `values` fill `%(name)s` placeholders."""
    text = translations(_current.get()).gettext(message)
    return text % values if values else text


def ngettext(singular: str, plural: str, n: int, **values: Any) -> str:
    """The singular or plural form for `n` in the current language; `%(num)d` is `n`."""
    text = translations(_current.get()).ngettext(singular, plural, n)
    return text % {"num": n, **values}


def gettext_raw(message: str) -> str:
    """`message` in the current language, unformatted (Jinja2's new-style gettext formats it)."""
    return translations(_current.get()).gettext(message)


def ngettext_raw(singular: str, plural: str, n: int) -> str:
    """The form for `n` in the current language, unformatted (for Jinja2, as gettext_raw)."""
    return translations(_current.get()).ngettext(singular, plural, n)


def use(locale: str) -> None:
    """Make `locale` (one of LOCALES; anything else: DEFAULT) the current request's language."""
    _current.set(locale if locale in LOCALES else DEFAULT)


def current() -> str:
    """The current request's locale, one of LOCALES."""
    return _current.get()


def current_tag() -> str:
    """The current language as a BCP 47 tag ('zh-CN' or 'en'), for <html lang>."""
    return TAGS[_current.get()]
