"""A secret string (a signing key, an API key) whose repr and str never show its value."""

from __future__ import annotations


class Secret:
    """value: the raw secret (str); `.reveal()` only where it is sent or keys an HMAC."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}('**********')"

    def __str__(self) -> str:
        return "**********"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)
