"""Which front-matter (Markdown) and record (JSONL) fields a document keeps as metadata.

Rationale: docs/design-notes.md, "indexes/ingest/metadata.py".
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ..safe_text import clean_text
from ..types import IngestWarning, Metadata, MetaScalar, MetaValue

__all__ = ["BUILTIN_NAMES", "MAX_BYTES", "MAX_FIELDS", "MAX_ITEMS", "MAX_NAME_CHARS", "MAX_STRING_CHARS",
           "keep_metadata", "name_problem"]

MAX_NAME_CHARS = 64
MAX_STRING_CHARS = 512
MAX_ITEMS = 64
MAX_FIELDS = 32
MAX_BYTES = 8 * 1024
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Metadata every document has (when known), from its own fields: a source field may not shadow them.
BUILTIN_NAMES = ("document_id", "path", "dataset", "title", "url", "publish_time")


def name_problem(name: str) -> str | None:
    """Why `name` cannot be a kept metadata name, or None when it can."""
    if not name or len(name) > MAX_NAME_CHARS:
        return f"names of 1 to {MAX_NAME_CHARS} characters are kept"
    if _CONTROL.search(name):
        return "names with control characters are not kept"
    return None


_KEPT = "strings, numbers, booleans, dates, and flat lists of them are"


def _scalar(value: Any, in_list: bool = False) -> MetaScalar | None:
    """A kept scalar, or None for "no value"; raises ValueError saying why it is not kept.
    in_list: `value` is an item of a list (a list there is a nested list)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if abs(value) > 2**63:
            raise ValueError("integers beyond 2**63 are not kept")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("only finite numbers are kept")
        return value
    if isinstance(value, dt.date):  # datetime is a date too
        return value.isoformat()
    if isinstance(value, str):
        text = value.strip()
        if clean_text(text) != text:  # served as Dify metadata: nothing unchecked reaches a caller
            raise ValueError("strings with control characters or non-characters are not kept")
        if len(text) > MAX_STRING_CHARS:
            raise ValueError(f"strings of at most {MAX_STRING_CHARS} characters are kept")
        return text or None
    if isinstance(value, list | tuple):
        what = "a list inside a list" if in_list else "a list"
    elif isinstance(value, dict):
        what = "an object inside a list" if in_list else "an object (a mapping)"
    else:
        what = f"a {type(value).__name__}"
    raise ValueError(f"{what} is not kept ({_KEPT})")


def _value(value: Any) -> MetaValue | None:
    if isinstance(value, list | tuple):
        if len(value) > MAX_ITEMS:
            raise ValueError(f"lists of at most {MAX_ITEMS} items are kept")
        items = [s for s in (_scalar(v, in_list=True) for v in value) if s is not None]
        return tuple(items) or None
    return _scalar(value)


def keep_metadata(fields: Mapping[str, Any], reserved: frozenset[str],
                  where: str, line: int | None = None) -> tuple[Metadata, list[IngestWarning]]:
    """The metadata a document keeps from `fields` (front matter or a JSONL record).

    reserved: the reader's own keys (not metadata). where / line: the source, for warnings.
    Returns (metadata sorted by name, one IngestWarning per field not kept). Never raises.
    """
    kept: dict[str, MetaValue] = {}
    warnings: list[IngestWarning] = []
    size = 0
    for raw_name, raw in fields.items():
        name = str(raw_name)
        if name in reserved:
            continue
        problem = name_problem(name)
        if problem is None and name in BUILTIN_NAMES:
            problem = "is a built-in metadata name"
        value: MetaValue | None = None
        if problem is None:
            try:
                value = _value(raw)
            except ValueError as exc:
                problem = str(exc)
        if problem is None and value is not None:
            cost = len(json.dumps([name, value], ensure_ascii=False).encode("utf-8"))
            if len(kept) >= MAX_FIELDS:
                problem = f"a document keeps at most {MAX_FIELDS} metadata fields"
            elif size + cost > MAX_BYTES:
                problem = f"a document keeps at most {MAX_BYTES} bytes of metadata"
            else:
                size += cost
                kept[name] = value
        if problem is not None:
            shown = _CONTROL.sub("?", name)[:MAX_NAME_CHARS]
            warnings.append(IngestWarning(where, f"metadata field {shown!r} not kept: {problem}", line))
    return tuple(sorted(kept.items())), warnings
