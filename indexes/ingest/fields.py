"""Parsing of metadata values shared by the JSONL and Markdown readers."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..types import CoverImage

__all__ = ["parse_cover_image", "parse_publish_time", "parse_qa_visible"]


def parse_publish_time(value: Any) -> int | None:
    """int/float unix seconds, ISO date/date-time str (naive = UTC), date/datetime → int seconds.

    None or '' → None. Raises ValueError for anything else.
    """
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError("'publish_time' must be unix seconds or an ISO date")
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, dt.datetime):
        moment = value
    elif isinstance(value, dt.date):
        moment = dt.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        text = value.strip()
        if text.isdigit():
            return int(text)
        try:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"'publish_time' {value!r} is not an ISO date") from None
    else:
        raise ValueError("'publish_time' must be unix seconds or an ISO date")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp())


def _int_or_none(value: Any, key: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"cover_image.{key} must be an integer")
    return int(value)


def parse_cover_image(value: Any) -> CoverImage | None:
    """A url string or {url, height, width} mapping → CoverImage; None/'' → None."""
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
