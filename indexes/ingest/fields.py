"""Parsing of metadata values shared by the JSONL and Markdown readers."""

from __future__ import annotations

import datetime as dt
from typing import Any

from .. import publish_time
from ..invisible import name_problem
from ..types import CoverImage

__all__ = ["MAX_COVER_PIXELS", "MAX_ID_BYTES", "cover_size_problem", "dataset_problem", "id_problem",
           "length_problem", "parse_cover_image", "parse_publish_time", "parse_qa_visible"]

MAX_ID_BYTES = 1024
"""The longest document id, path or dataset name, in UTF-8 bytes. Each is indexed as one raw
Tantivy term, and Tantivy drops a term over 65,530 bytes: a longer id could never be found,
replaced or deleted (every write added a copy). 1,024 bytes leaves that limit far behind for
the chunk ids (`id#N`) and the ids callers see (Volcengine `Id`, Dify `record_id`), holds any
file path of a tree (255-byte names, a few levels deep) and 341 CJK characters, and is the key
limit of S3 and other stores an id is often taken from."""


def parse_publish_time(value: Any, name: str = "publish_time") -> tuple[int | None, str | None]:
    """A publish time as a reader finds it → (unix seconds or None, a warning or None).

    value: int/float unix seconds, a string of ASCII digits (the same), an ISO-8601 date or
    date-time string (naive = UTC), or a date/datetime (YAML's) → int seconds, the rule of
    `indexes.publish_time`: 13-digit milliseconds are divided by 1000 and the warning says
    so, naming both values (the caller adds where); None or '' → (None, None).
    name: the field's name in messages ('publish_time', or Markdown's 'date').
    Raises ValueError naming the value for anything else: not a time, not finite, or outside
    0001-01-01..9999-12-31 (the record is refused: the readers report it, with its line).
    """
    if value is None or value == "":
        return None, None
    if isinstance(value, bool):
        raise ValueError(f"'{name}' must be unix seconds or an ISO date")
    if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, (int, float)):
        seconds, as_ms = publish_time.from_number(value, name)
        if not as_ms:
            return seconds, None
        return seconds, (f"'{name}' {value!r} read as milliseconds: kept as {seconds} "
                         f"({publish_time.rfc3339(seconds)}); publish_time is unix seconds")
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"'{name}' {value!r} is not an ISO date") from None
    else:
        raise ValueError(f"'{name}' must be unix seconds or an ISO date")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    try:
        seconds = int(moment.timestamp())
    except (OverflowError, ValueError):
        seconds = publish_time.LATEST + 1
    if not publish_time.EARLIEST <= seconds <= publish_time.LATEST:
        raise ValueError(f"'{name}' {str(value)!r} is outside the times kept (0001-01-01 to 9999-12-31 UTC)")
    return seconds, None


def dataset_problem(name: str) -> str | None:
    """Why `name` cannot be a dataset name, or None when it can ('' is no dataset): it holds
    ':' (tree ids are 'dataset:path', so dataset 'a' with 'b:x.md' and dataset 'a:b' with
    'x.md' would both be 'a:b:x.md') or what no name may hold (`indexes.invisible.name_problem`).
    Never raises."""
    if ":" in name:
        return "holds ':' (document ids are 'dataset:path', so a dataset name may not hold ':')"
    return name_problem(name) or length_problem(name)


def length_problem(name: str) -> str | None:
    """Why `name` (a document id, path or dataset name) is too long to be one: over MAX_ID_BYTES
    UTF-8 bytes (the reason names its size and the limit, never the text); None when it is not.
    Never raises."""
    if len(name) * 4 <= MAX_ID_BYTES:  # no character is over 4 bytes
        return None
    size = len(name.encode("utf-8", "surrogatepass"))
    if size <= MAX_ID_BYTES:
        return None
    return (f"is {size} bytes long (UTF-8), over the limit of {MAX_ID_BYTES} bytes for document ids, paths and "
            "dataset names")


def id_problem(name: str) -> str | None:
    """Why `name` cannot be a document id or path, or None when it can: it holds a control,
    format or non-character (`indexes.invisible.name_problem`: an identity is never rewritten)
    or is over MAX_ID_BYTES (`length_problem`). Never raises."""
    problem = name_problem(name)
    if problem is not None:
        return f"{problem}: ids and paths may not hold invisible characters"
    return length_problem(name)


MAX_COVER_PIXELS = 100_000
"""The largest cover height or width kept, in pixels (sizes are 1..MAX_COVER_PIXELS). Well past
any picture a page shows (JPEG stops at 65,535, WebP at 16,383), and far inside what every
consumer reads: Tantivy's i64 field (2^63 crashed the write), the callback's `CoverImage`
integers and a JavaScript number."""


def cover_size_problem(value: int, key: str) -> str | None:
    """Why `value` cannot be a cover `key` ('height', 'width'), or None when it can: outside
    1..MAX_COVER_PIXELS. The reason names the field. Never raises."""
    if 1 <= value <= MAX_COVER_PIXELS:
        return None
    return _out_of_range(str(value), key)


def _out_of_range(digits: str, key: str) -> str:
    shown = digits if len(digits) <= 24 else digits[:20] + "…"
    return f"'cover_image.{key}' {shown} is out of range 1..{MAX_COVER_PIXELS} (pixels)"


def _int_or_none(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"'cover_image.{key}' must be an integer")
    if isinstance(value, str):
        text = value.strip()
        unsigned = text[1:] if text[:1] in "+-" else text
        if unsigned.isascii() and unsigned.isdigit() and len(unsigned) > 24:
            raise ValueError(_out_of_range(text, key))  # int() refuses 4,301 digits and up: out of range anyway
    try:
        number = int(value)
    except ValueError:  # int()'s own message names no field
        raise ValueError(f"'cover_image.{key}' must be an integer, not {str(value)[:40]!r}") from None
    if (problem := cover_size_problem(number, key)) is not None:
        raise ValueError(problem)
    return number


def parse_cover_image(value: Any) -> CoverImage | None:
    """A url string or {url, height, width} mapping → CoverImage; None/'' → None. Height and
    width are integers (or strings of one) in 1..MAX_COVER_PIXELS. Raises ValueError naming
    the field ('cover_image', 'cover_image.width'...) otherwise."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return CoverImage(url=value)
    if isinstance(value, dict) and isinstance(value.get("url"), str):
        return CoverImage(
            url=value["url"],
            height=_int_or_none(value.get("height"), "height"),
            width=_int_or_none(value.get("width"), "width"),
        )
    raise ValueError("'cover_image' must be a url string or an object with 'url'")


def parse_qa_visible(value: Any) -> bool:
    """bool, or the strings true/false/yes/no/1/0 → bool. Raises ValueError otherwise."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in {"true", "yes", "1", "false", "no", "0"}:
        return value.strip().lower() in {"true", "yes", "1"}
    raise ValueError(f"'qa_visible' must be a boolean, got {value!r}")
