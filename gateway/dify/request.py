"""Dify's retrieval request, read as Dify sends it (api/services/external_knowledge_service.py):

Rationale: docs/design-notes.md, "gateway/dify/request.py".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gateway.core.config import DifyConfig
from gateway.core.errors import DifyError
from gateway.core.validate import Fields, clip
from indexes.metadata import as_number, condition_problem, iso_time
from indexes.types import META_ALIASES, META_OPERATORS, MetaCondition, MetaFilter, MetaScalar, MetaValue

MAX_CONDITIONS = 32
MAX_ITEMS = 100
MAX_NAME_CHARS = 256
MAX_VALUE_CHARS = 1024
TEXT_OPS = ("contains", "not contains", "start with", "end with")
NUMERIC_OPS = (">", "<", "≥", "≤")
TIME_OPS = ("before", "after")


@dataclass(frozen=True, slots=True)
class Retrieval:
    """One retrieval request. top_k: clamped; score_threshold: 0..1; where: None = no
    narrowing; skipped: conditions dropped for a null value."""

    knowledge_id: str
    query: str
    top_k: int
    score_threshold: float
    where: MetaFilter | None
    skipped: int = 0


def invalid(key: str, text: str) -> DifyError:
    """request_invalid naming the field."""
    return DifyError("dify.request_invalid", f"{key} {text}")


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def read(f: Fields, cfg: DifyConfig) -> Retrieval:
    """The request in `f` (the body's Fields). Raises DifyError('dify.request_invalid')."""
    knowledge_id = f.string("knowledge_id", max_len=128)
    query = f.string("query", non_blank=True, max_len=cfg.max_query_chars)
    top_k, threshold = cfg.default_top_k, 0.0
    setting = f.data.get("retrieval_setting")
    if setting is not None:
        if not isinstance(setting, dict):
            raise invalid("retrieval_setting", "must be an object")
        raw_k = setting.get("top_k")
        if raw_k is not None:
            # An integral float (5.0) is an integer, as for the callback's Limit; 0, a negative,
            # a fraction, a boolean or a string is refused; above max_top_k is clamped (#25439).
            if not _number(raw_k) or not math.isfinite(raw_k) or raw_k != math.floor(raw_k) or raw_k < 1:
                raise invalid("retrieval_setting.top_k", "must be a positive integer")
            top_k = min(cfg.max_top_k, int(raw_k))
        raw_t = setting.get("score_threshold")
        if raw_t is not None:
            if not _number(raw_t) or not 0.0 <= raw_t <= 1.0:  # NaN and ±inf fail the comparison too
                raise invalid("retrieval_setting.score_threshold", "must be a number from 0 to 1")
            threshold = float(raw_t)
    where, skipped = _condition(f.data.get("metadata_condition"))
    return Retrieval(knowledge_id, query, top_k, threshold, where, skipped)


def _condition(raw: Any) -> tuple[MetaFilter | None, int]:
    at = "metadata_condition"
    if raw is None:
        return None, 0
    if not isinstance(raw, dict):
        raise invalid(at, "must be an object or null")
    logic = raw.get("logical_operator")
    if logic is None:
        logic = "and"
    if logic not in ("and", "or"):
        raise invalid(f"{at}.logical_operator", "must be 'and' or 'or'")
    items = raw.get("conditions")
    if items is None:
        return None, 0
    if not isinstance(items, list) or len(items) > MAX_CONDITIONS:
        raise invalid(f"{at}.conditions", f"must be a list of at most {MAX_CONDITIONS} conditions")
    conditions: list[MetaCondition] = []
    skipped = 0
    for i, item in enumerate(items):
        c = _one(item, f"{at}.conditions[{i}]")
        if c is None:
            skipped += 1
        else:
            conditions.append(c)
    if not conditions:
        return None, skipped
    return MetaFilter(logic, tuple(conditions)), skipped


def _one(item: Any, at: str) -> MetaCondition | None:
    """One condition, or None when its value is null (skipped, as Dify does)."""
    if not isinstance(item, dict):
        raise invalid(at, "must be an object")
    name = item.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        raise invalid(f"{at}.name", f"must be a string of 1 to {MAX_NAME_CHARS} characters")
    op = item.get("comparison_operator")
    op = META_ALIASES.get(op, op) if isinstance(op, str) else op
    if op not in META_OPERATORS:
        shown = clip(op, 20) if isinstance(op, str) else type(op).__name__
        raise invalid(f"{at}.comparison_operator", f"{shown!r} is not one of Dify's operators: "
                                                   + ", ".join(META_OPERATORS))
    if op in ("empty", "not empty"):
        return MetaCondition(name, op)
    raw = item.get("value")
    if raw is None:
        return None
    value = _value(op, raw, f"{at}.value")
    c = MetaCondition(name, op, value)
    problem = condition_problem(c)
    if problem is not None:
        raise invalid(f"{at}.value", problem)
    return c


def _scalar(v: Any, key: str) -> MetaScalar:
    if isinstance(v, bool):
        return "true" if v else "false"  # booleans are kept as these strings at ingest
    if _number(v):
        if not math.isfinite(v):
            raise invalid(key, "must be a finite number")
        return v  # type: ignore[no-any-return]
    if isinstance(v, str):
        if len(v) > MAX_VALUE_CHARS:
            raise invalid(key, f"must be at most {MAX_VALUE_CHARS} characters")
        return v
    raise invalid(key, "must be a string or a number")


def _value(op: str, raw: Any, key: str) -> MetaValue:
    if op in ("in", "not in"):
        if isinstance(raw, str):
            raw = [x.strip() for x in raw.split(",") if x.strip()]
        elif not isinstance(raw, list):
            raw = [raw]
        if not raw or len(raw) > MAX_ITEMS:
            raise invalid(key, f"must hold 1 to {MAX_ITEMS} items")
        return tuple(_scalar(x, f"{key}[{i}]") for i, x in enumerate(raw))
    if isinstance(raw, list | dict):
        raise invalid(key, f"must be a string or a number for {op!r}")
    v = _scalar(raw, key)
    if op in NUMERIC_OPS and isinstance(v, str) and as_number(v) is None:  # None for "1e309" as for "inf"
        raise invalid(key, f"must be a finite number or an ISO-8601 date for {op!r}")
    if op in TIME_OPS and isinstance(v, str) and iso_time(v.strip()) is None:
        raise invalid(key, f"must be unix seconds or an ISO-8601 date for {op!r}")
    return v
