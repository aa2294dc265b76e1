"""Document metadata in the index: the terms every chunk carries, and the Tantivy query of a
`MetaFilter` (Dify's `metadata_condition`).

Rationale: docs/design-notes.md, "indexes/metadata.py".
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import struct
from collections.abc import Iterator
from functools import lru_cache

import tantivy
from tantivy import Occur, Query

from .ingest.metadata import BUILTIN_NAMES, name_problem
from .types import Document, MetaCondition, Metadata, MetaFilter, MetaScalar, MetaValue

__all__ = ["FIELDS", "MAX_PATTERN_CHARS", "SEP", "as_number", "condition_problem", "decode", "encode", "encode_number",
           "filter_query", "index_terms", "iso_time"]

SEP = "\x1f"
FIELDS = ("meta_keys", "meta_text", "meta_num")
MAX_PATTERN_CHARS = 64
"""Longest v of contains / start with / end with: each becomes a Tantivy regex, whose automaton
has a size limit (1000 states); 64 characters of 4 UTF-8 bytes each still compile after a
64-character name (tests/indexes/test_metadata.py)."""
_HEX = "0123456789abcdef"
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:?\d{2})?)?")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_REGEX_META = re.compile(r"([\\.+*?()|\[\]{}^$#&~-])")
_NEGATED = {"not contains": "contains", "is not": "is", "≠": "=", "not in": "in"}


def iso_time(text: str) -> int | None:
    """Unix seconds of an ISO-8601 date or date-time string (naive = UTC), else None."""
    if not _ISO.fullmatch(text):
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp())


def as_number(v: MetaScalar) -> float | None:
    """v as a finite number: itself, a numeric string, or an ISO date's unix seconds; else
    None. A string beyond a double ("1e309") is None like "inf": no value is infinite."""
    if not isinstance(v, int | float) and not _NUMBER.fullmatch(v.strip()):
        t = iso_time(v.strip())
        return None if t is None else float(t)
    try:
        x = float(v)
    except OverflowError:  # an int beyond a double
        return None
    return x if math.isfinite(x) else None


def encode_number(x: float) -> str:
    """16 lower-case hex digits that sort (as strings) like the numbers: IEEE 754 big-endian
    bits, all flipped for a negative number, the sign bit set for a positive one (-0.0 = 0.0)."""
    (bits,) = struct.unpack(">Q", struct.pack(">d", float(x) + 0.0))
    bits = bits ^ 0xFFFF_FFFF_FFFF_FFFF if bits >> 63 else bits | 1 << 63
    return f"{bits:016x}"


def _all_metadata(doc: Document) -> Iterator[tuple[str, MetaValue]]:
    """Built-in names with a value, then the kept fields."""
    for name, value in (("document_id", doc.id), ("path", doc.path), ("dataset", doc.dataset),
                        ("title", doc.title), ("url", doc.url or "")):
        if value:
            yield name, value
    if doc.publish_time is not None:
        yield "publish_time", doc.publish_time
    yield from doc.metadata


def index_terms(doc: Document) -> dict[str, list[str]]:
    """field → terms of `doc` for FIELDS (see the module docstring), each field's terms unique."""
    keys: list[str] = []
    text: list[str] = []
    nums: list[str] = []
    for name, value in _all_metadata(doc):
        keys.append(name)
        for v in value if isinstance(value, tuple) else (value,):
            if isinstance(v, str):
                text.append(name + SEP + v)
                t = iso_time(v)
                if t is not None:
                    nums.append(name + SEP + encode_number(t))
            else:
                nums.append(name + SEP + encode_number(v))
    return {"meta_keys": list(dict.fromkeys(keys)), "meta_text": list(dict.fromkeys(text)),
            "meta_num": list(dict.fromkeys(nums))}


def encode(metadata: Metadata) -> str:
    """The kept fields as stored with each chunk (JSON pairs); '' for none."""
    return json.dumps([[n, list(v) if isinstance(v, tuple) else v] for n, v in metadata],
                      ensure_ascii=False) if metadata else ""


def decode(raw: bytes | str | None) -> Metadata:
    """`encode` read back: () for nothing stored (or anything unreadable)."""
    if not raw:
        return ()
    try:
        pairs = json.loads(raw)
        return tuple((str(n), tuple(v) if isinstance(v, list) else v) for n, v in pairs)
    except (ValueError, TypeError):
        return ()


# ------------------------------------------------------------------ queries


def _esc(text: str) -> str:
    return _REGEX_META.sub(r"\\\1", text)


def _range(enc: str, above: bool, inclusive: bool) -> str | None:
    """A regex of the 16-hex terms above (or below) `enc`, or None when there is none."""
    alts = []
    for i, c in enumerate(enc):
        k = _HEX.index(c)
        chars = _HEX[k + 1:] if above else _HEX[:k]
        if chars:
            rest = 15 - i
            alts.append(enc[:i] + f"[{chars}]" + (f"[0-9a-f]{{{rest}}}" if rest else ""))
    if inclusive:
        alts.append(enc)
    return "(?:" + "|".join(alts) + ")" if alts else None


@lru_cache(maxsize=1)
def _scratch() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    for name in FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    return sb.build()


def _text_pattern(c: MetaCondition) -> str | None:
    """The regex of contains / start with / end with, or None when v cannot be used."""
    v = c.value
    if isinstance(v, int | float) and not isinstance(v, bool):
        v = json.dumps(v)
    if not isinstance(v, str):
        return None
    name = _esc(c.name) + r"\x1f"
    body = {"contains": f".*{_esc(v)}.*", "start with": f"{_esc(v)}.*", "end with": f".*{_esc(v)}"}[c.operator]
    return "(?s)" + name + body


def condition_problem(c: MetaCondition) -> str | None:
    """Why the index cannot evaluate `c` (a pattern too long for a Tantivy regex), or None.
    A name no document can hold (`indexes.ingest.metadata.name_problem`) has none: it
    matches nothing before any pattern is built."""
    if name_problem(c.name) is not None:
        return None
    if c.operator in ("contains", "start with", "end with", "not contains"):
        op = _NEGATED.get(c.operator, c.operator)
        if isinstance(c.value, str) and len(c.value) > MAX_PATTERN_CHARS:
            return f"is longer than {MAX_PATTERN_CHARS} characters"
        pattern = _text_pattern(MetaCondition(c.name, op, c.value))
        if pattern is not None:
            try:
                Query.regex_query(_scratch(), "meta_text", pattern)
            except ValueError:
                return "is too long to match with"
    return None


def _term(schema: tantivy.Schema, field: str, name: str, text: str) -> Query:
    return Query.term_query(schema, field, name + SEP + text)


def _equals(schema: tantivy.Schema, name: str, v: MetaScalar, numeric_strings: bool) -> Query:
    if isinstance(v, str):
        x = as_number(v) if numeric_strings else None
        if x is None:
            return _term(schema, "meta_text", name, v)
        return _term(schema, "meta_num", name, encode_number(x))
    return _term(schema, "meta_num", name, encode_number(v))


def _compare(schema: tantivy.Schema, name: str, v: MetaValue | None, op: str) -> Query | None:
    if v is None or isinstance(v, tuple):
        return None
    x = as_number(v)
    if x is None:
        return None
    rx = _range(encode_number(x), above=op in (">", "≥"), inclusive=op in ("≥", "≤"))
    return None if rx is None else Query.regex_query(schema, "meta_num", _esc(name) + r"\x1f" + rx)


def _positive(schema: tantivy.Schema, c: MetaCondition) -> Query | None:
    """The query of a positive operator, or None when it matches nothing."""
    op, v, name = c.operator, c.value, c.name
    if op == "not empty":
        return Query.term_query(schema, "meta_keys", name)
    if op in ("contains", "start with", "end with"):
        pattern = _text_pattern(c)
        return None if pattern is None else Query.regex_query(schema, "meta_text", pattern)
    if op in ("is", "="):
        if v is None or isinstance(v, tuple):
            return None
        return _equals(schema, name, v, numeric_strings=op == "=")
    if op == "in":
        items = v if isinstance(v, tuple) else (v,) if v is not None else ()
        qs = [_equals(schema, name, x, numeric_strings=False) for x in items]
        return Query.boolean_query([(Occur.Should, q) for q in qs]) if qs else None
    if op in ("before", "after"):
        if isinstance(v, str) and iso_time(v.strip()) is None:
            return None  # a time is a number of seconds or an ISO date, never any other text
        return _compare(schema, name, v, "<" if op == "before" else ">")
    return _compare(schema, name, v, op)  # > < ≥ ≤


def _condition(schema: tantivy.Schema, searcher: tantivy.Searcher, c: MetaCondition) -> Query | None:
    if c.name not in BUILTIN_NAMES and searcher.doc_freq("meta_keys", c.name) == 0:
        return None  # a name no document holds matches nothing
    key = Query.term_query(schema, "meta_keys", c.name)
    if c.operator == "empty":
        return Query.boolean_query([(Occur.Must, Query.all_query()), (Occur.MustNot, key)])
    positive = _positive(schema, MetaCondition(c.name, _NEGATED.get(c.operator, c.operator), c.value))
    if c.operator not in _NEGATED or positive is None:
        return positive  # a value the positive operator cannot use: its negation matches nothing too
    return Query.boolean_query([(Occur.Must, key), (Occur.MustNot, positive)])


def filter_query(schema: tantivy.Schema, searcher: tantivy.Searcher, flt: MetaFilter) -> Query | None:
    """The constant-score (0) query matching the documents `flt` admits, or None when it
    admits every document (no conditions). searcher: whose term statistics tell which names
    any document holds. Raises ValueError for a pattern Tantivy cannot compile (see
    `condition_problem`, which callers check first)."""
    if not flt.conditions:
        return None
    parts = [_condition(schema, searcher, c) for c in flt.conditions]
    if flt.logic == "and":
        if any(p is None for p in parts):
            return Query.empty_query()
        q = Query.boolean_query([(Occur.Must, p) for p in parts if p is not None])
    else:
        live = [p for p in parts if p is not None]
        if not live:
            return Query.empty_query()
        q = Query.boolean_query([(Occur.Should, p) for p in live])
    return Query.const_score_query(q, 0.0)
