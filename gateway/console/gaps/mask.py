"""Obvious personal identifiers masked out of a question before its text is kept.

Rationale: docs/design-notes.md, "gateway/console/gaps/mask.py".
"""

from __future__ import annotations

import re

EMAIL = "[email]"
ID_CARD = "[id]"
BANK_CARD = "[card]"
PHONE = "[phone]"

_D = "0-9\uff10-\uff19"  # ASCII and full-width digits
_S = " \\-\uff0d"  # a space, '-' or a full-width '-' between groups
_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+[@\uff20][A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_ID = re.compile(rf"(?<![{_D}])[{_D}]{{17}}[{_D}Xx\uff38\uff58](?![{_D}A-Za-z])")
_CARD = re.compile(rf"(?<![{_D}])(?:[{_D}]{{16,19}}"
                   rf"|[{_D}]{{4}}([{_S}])[{_D}]{{4}}(?:\1[{_D}]{{4}}){{2}}(?:\1[{_D}]{{1,3}})?)(?![{_D}])")
_PHONE = re.compile(rf"(?<![{_D}+\uff0b])(?:[+\uff0b]?[8\uff18][6\uff16][{_S}]?)?[1\uff11][3-9\uff13-\uff19][{_D}]"
                    rf"([{_S}]?)[{_D}]{{4}}\1[{_D}]{{4}}(?![{_D}])")
_ANY = re.compile(rf"[{_D}@\uff20]")


def luhn(digits: str) -> bool:
    """True when the ASCII digit string `digits` passes the Luhn check (ISO/IEC 7812)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


def _card(m: re.Match[str]) -> str:
    raw = m.group(0)
    digits = "".join(str(int(c)) for c in raw if c.isdecimal())  # int() reads full-width digits too
    return BANK_CARD if luhn(digits) else raw


def mask(text: str) -> str:
    """`text` with the identifiers of the module doc replaced by their placeholders."""
    if _ANY.search(text) is None:
        return text
    text = _EMAIL.sub(EMAIL, text)
    text = _ID.sub(ID_CARD, text)
    text = _CARD.sub(_card, text)
    return _PHONE.sub(PHONE, text)
