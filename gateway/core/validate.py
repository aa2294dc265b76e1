"""Typed reads of untrusted objects: one helper set for config, the Volcengine body and agent requests.

Rationale: docs/design-notes.md, "gateway/core/validate.py".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, NoReturn

import orjson

from indexes.invisible import blank as invisible_blank

Kind = Literal["missing", "type", "empty", "too_long", "range", "unknown", "format",  # a field
               "utf8", "json", "object", "media", "too_large", "timeout"]  # a whole body


@dataclass(frozen=True, slots=True)
class Problem:
    """One malformed field.

    key: dotted path of the field, e.g. 'server.workers', 'input.limit', 'Query', 'body'.
    kind: what is wrong (missing, type, empty, too_long, range, unknown, format; for a whole
        body utf8, json, object, media, too_large, timeout), so a caller can map kinds to its
        own error codes.
    text: what is wrong, phrased to follow the key: 'must be an integer from 1 to 64'.
    """

    key: str
    kind: Kind
    text: str

    @property
    def message(self) -> str:
        """'{key} {text}': the sentence agents and logs see."""
        return f"{self.key} {self.text}"


Invalid = Callable[[Problem], Exception]
"""An error factory: the caller's exception for a Problem (raised by the getters)."""

class ProblemError(Exception):
    """The plain error factory, for a caller that decides later what a Problem means."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.message)
        self.problem = problem


REQUIRED: Any = object()
"""The default that makes a field required (a missing field is a 'missing' Problem)."""


def fail(invalid: Invalid, key: str, kind: Kind, text: str) -> NoReturn:
    """Raise `invalid(Problem(key, kind, text))`."""
    raise invalid(Problem(key, kind, text))


MAX_JSON_DEPTH = 64
"""The deepest nesting of arrays and objects a request's JSON may hold. orjson reads 1,024
levels but writes only 255, so a deeper request read whole could not be written back (an
answer, a log line, a stored record) and failed as a 500; no request kbgate reads needs more
than a few levels (a metadata condition: about 4)."""


class JsonTooDeep(ValueError):
    """JSON nested deeper than MAX_JSON_DEPTH; its message names the limit."""

    def __init__(self, key: str = "body") -> None:
        super().__init__(f"{key} nests arrays and objects over {MAX_JSON_DEPTH} levels deep "
                         f"(the limit of a request's JSON)")


def json_depth(value: Any, stop: int = MAX_JSON_DEPTH) -> int:
    """How deep `value` (what orjson.loads returns) nests lists and dicts: 0 for a scalar, 1
    for [] or {}; stops counting once past `stop`. Iterative (no recursion)."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if deepest > stop:
            break
        todo.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


def loads_bounded(raw: bytes | str, key: str = "body") -> Any:
    """orjson.loads(raw), refused past MAX_JSON_DEPTH. Raises orjson.JSONDecodeError (not
    JSON) or JsonTooDeep (naming `key` and the limit)."""
    data = orjson.loads(raw)
    if json_depth(data) > MAX_JSON_DEPTH:
        raise JsonTooDeep(key)
    return data


def json_object(raw: bytes, invalid: Invalid, key: str = "body") -> dict[str, Any]:
    """Parse raw bytes as a UTF-8 JSON object (the one parse every JSON endpoint uses).

    raw: the request body as received. Raises invalid(Problem(key, kind)) with kind 'utf8'
    (not valid UTF-8), 'json' (not JSON, or nested over MAX_JSON_DEPTH levels: the text names
    the limit) or 'object' (JSON, but not an object).
    """
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        fail(invalid, key, "utf8", "is not valid UTF-8")
    try:
        data = loads_bounded(raw, key)
    except JsonTooDeep:
        fail(invalid, key, "json", f"nests arrays and objects over {MAX_JSON_DEPTH} levels deep "
                                   "(the limit of a request's JSON)")
    except orjson.JSONDecodeError:
        fail(invalid, key, "json", "is not JSON")
    if not isinstance(data, dict):
        fail(invalid, key, "object", "is not a JSON object")
    return data


# Characters that show nothing and separate nothing: zero-width space/non-joiner/joiner, word
# joiner, BOM (zero-width no-break space), Mongolian vowel separator. `str.strip` keeps them.
def blank(text: str) -> bool:
    """Does `text` show nothing: only separators (Z*: ASCII and ideographic spaces, NBSP, U+2028...),
    format characters (Cf: zero-width, BOM, soft hyphen, bidi controls, tag characters), control
    characters (Cc) and the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0)? Such a query finds
    nothing (`indexes.analysis` folds the same characters out or breaks words on them), so every
    wing refuses it as empty (`Fields.string(non_blank=True)`; queries of zero-width
    spaces, then of Hangul fillers and soft hyphens, were answered 200 with no results).
    The set: `indexes.invisible`."""
    return invisible_blank(text)


def clip(text: str, max_chars: int) -> str:
    """`text` cut to at most `max_chars` characters, ending in '…' when cut (titles, names
    echoed in messages: untrusted text never enters a message or an answer unbounded)."""
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


class Fields:
    """Typed getters over one object. data: the parsed object; at: its dotted path ('' at the
    top); invalid: the caller's error factory. Every getter raises invalid(Problem) on a bad
    field and never anything else."""

    __slots__ = ("data", "at", "invalid", "noun")

    def __init__(self, data: Mapping[str, Any], at: str, invalid: Invalid, noun: str = "an object") -> None:
        self.data = data
        self.at = at
        self.invalid = invalid
        self.noun = noun  # what a nested object is called: 'a table' in TOML

    def key(self, name: str) -> str:
        """The dotted path of field `name` ('server.workers'; 'Query' at the top)."""
        return f"{self.at}.{name}" if self.at else name

    def fail(self, name: str, kind: Kind, text: str) -> NoReturn:
        """Raise the caller's error for field `name`."""
        fail(self.invalid, self.key(name), kind, text)

    def __contains__(self, name: object) -> bool:
        return name in self.data

    def only(self, allowed: Iterable[str], text: str = "is not a known field") -> None:
        """Refuse a field outside `allowed` (kind 'unknown'; the name is clipped to 40 characters)."""
        known = set(allowed)
        for name in self.data:
            if name not in known:
                self.fail(clip(str(name), 40), "unknown", text)

    def table(self, name: str) -> Fields:
        """The nested object `name` as Fields ({} when absent). Kind: type."""
        if name not in self.data:
            return Fields({}, self.key(name), self.invalid, self.noun)
        v = self.data[name]
        if not isinstance(v, dict):
            self.fail(name, "type", f"must be {self.noun}")
        return Fields(v, self.key(name), self.invalid, self.noun)

    def string(self, name: str, default: Any = REQUIRED, *, max_len: int | None = None,
               non_blank: bool = False) -> str:
        """A non-empty string (characters, not bytes). non_blank: whitespace and zero-width
        characters alone are 'empty' (`blank`).

        Absent: `default`, or a 'missing' Problem when required. Kinds: missing, type,
        empty, too_long.
        """
        if name not in self.data:
            if default is REQUIRED:
                self.fail(name, "missing", "is required")
            return str(default)
        v = self.data[name]
        if not isinstance(v, str):
            self.fail(name, "type", "must be a string")
        if not v or (non_blank and blank(v)):
            self.fail(name, "empty", "must not be empty")
        if max_len is not None and len(v) > max_len:
            self.fail(name, "too_long", f"must be at most {max_len} characters")
        return v

    def optional_string(self, name: str, *, max_len: int | None = None, non_blank: bool = False) -> str | None:
        """Like `string`, but None when absent or null."""
        if self.data.get(name) is None:
            return None
        return self.string(name, max_len=max_len, non_blank=non_blank)

    def integer(self, name: str, default: int, *, lo: int, hi: int) -> int:
        """An integer in [lo, hi] (a boolean is not one); `default` when absent. Kinds: type, range."""
        v = self.data.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(name, "type", f"must be an integer from {lo} to {hi}")
        if not lo <= v <= hi:
            self.fail(name, "range", f"must be an integer from {lo} to {hi}")
        return v

    def number(self, name: str, default: float, *, lo: float, hi: float) -> float:
        """An int or float in [lo, hi], as float; `default` when absent. Kinds: type, range."""
        v = self.data.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.fail(name, "type", f"must be a number from {lo} to {hi}")
        if not lo <= v <= hi:
            self.fail(name, "range", f"must be a number from {lo} to {hi}")
        return float(v)

    def boolean(self, name: str, default: bool) -> bool:
        """true or false; `default` when absent. Kind: type."""
        v = self.data.get(name, default)
        if not isinstance(v, bool):
            self.fail(name, "type", "must be true or false")
        return v

    def choice(self, name: str, choices: tuple[str, ...], default: Any = REQUIRED) -> str:
        """One of `choices` (kind 'format' otherwise); `default` when absent."""
        if name not in self.data and default is not REQUIRED:
            return str(default)
        v = self.data.get(name)
        if v not in choices:
            if name not in self.data:
                self.fail(name, "missing", "is required")
            self.fail(name, "format", "must be " + _or(choices))
        return str(v)

    def strings(self, name: str, *, max_items: int | None = None, max_len: int | None = None,
                text: str | None = None) -> tuple[str, ...] | None:
        """A non-empty list of non-empty strings (duplicates dropped, order kept), or None when
        absent. Kinds: type (not such a list), range (too many items or too long an item).
        text: the whole complaint, for callers that state the limits in one phrase."""
        if name not in self.data:
            return None
        v = self.data[name]
        if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
            self.fail(name, "type", text or "must be a non-empty array of non-empty strings")
        if max_items is not None and len(v) > max_items:
            self.fail(name, "range", text or f"must hold at most {max_items} strings")
        if max_len is not None and any(len(x) > max_len for x in v):
            self.fail(name, "range", text or f"must hold strings of at most {max_len} characters")
        return tuple(dict.fromkeys(v))

    def required_strings(self, name: str, text: str = "is required") -> tuple[str, ...]:
        """`strings`, and absent is a 'missing' Problem with `text`."""
        v = self.strings(name)
        if v is None:
            self.fail(name, "missing", text)
        return v


def _or(choices: tuple[str, ...]) -> str:
    quoted = [f"'{c}'" for c in choices]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
