"""The Volcengine knowledge callback's wire format (the 联网问答Agent callback spec): parse the Body, shape the answer.

Rationale: docs/design-notes.md, "gateway/volcengine/wire.py".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from gateway.core.config import SearchConfig
from gateway.core.errors import CallbackError, MalformedRequest
from gateway.core.validate import Fields, Problem, json_object
from indexes.types import Hit

LEVEL_IDS = ("FirstLevelId", "SecondLevelId")


@dataclass(frozen=True, slots=True)
class CallbackRequest:
    """A parsed Volcengine knowledge query (the 联网问答Agent callback spec, "Body").

    first_level_id, second_level_id: the knowledge path as configured in the console
        (a JSON number is taken as its decimal string).
    query: non-empty, at most `search.max_query_chars` characters, stripped.
    limit: 1..`search.max_limit` after clamping.
    """

    first_level_id: str
    second_level_id: str
    query: str
    limit: int


def malformed(p: Problem) -> MalformedRequest:
    """The Ret reason of a malformed body (gateway.core.errors.RET_TABLE), message naming the field."""
    if p.kind in ("utf8", "json", "object"):
        return MalformedRequest(f"body_not_{p.kind}")
    if p.key == "Limit":
        return MalformedRequest("limit_invalid", "field Limit must be a positive integer")
    if p.kind == "missing":
        return MalformedRequest("field_missing", f"field {p.key} is missing")
    if p.key in LEVEL_IDS and p.kind != "type":
        return MalformedRequest("level_id_invalid", f"field {p.key} {p.text}")
    if p.kind == "type":
        return MalformedRequest("field_type", f"field {p.key} {p.text}")
    if p.kind == "empty":
        return MalformedRequest("query_empty")
    return MalformedRequest("query_too_long", f"field {p.key} {p.text}")


def parse_body(body: bytes, search: SearchConfig) -> CallbackRequest:
    """Parse and validate the raw body (already signature-verified) into a CallbackRequest.

    body: raw bytes, UTF-8 JSON object. Numbers for FirstLevelId/SecondLevelId are taken as
    their decimal string; Limit absent or null → search.default_limit; Limit above
    search.max_limit → clamped. Raises MalformedRequest with one reason per problem
    (body_not_utf8, body_not_json, body_not_object, field_missing, field_type,
    query_empty, query_too_long, limit_invalid, level_id_invalid).
    """
    f = Fields(json_object(body, malformed), "", malformed)
    first, second = (_level_id(f, name, search) for name in LEVEL_IDS)
    query = f.string("Query", non_blank=True, max_len=search.max_query_chars)
    return CallbackRequest(first, second, query.strip(), _limit(f, search))


def _level_id(f: Fields, name: str, search: SearchConfig) -> str:
    v = f.data.get(name)
    if isinstance(v, int) and not isinstance(v, bool):  # a console configured with numbers sends numbers
        f = Fields({name: str(v)}, "", f.invalid)
    return f.string(name, max_len=search.max_level_id_chars)


def _limit(f: Fields, search: SearchConfig) -> int:
    v = f.data.get("Limit")
    if v is None:
        return search.default_limit
    if isinstance(v, float) and v.is_integer():
        f = Fields({"Limit": int(v)}, "", f.invalid)
    return min(f.integer("Limit", 1, lo=1, hi=2**64), search.max_limit)


def result_item(hit: Hit) -> dict[str, Any]:
    """One Result item (the 联网问答Agent callback spec "Result") from a search hit; unknown optional fields omitted."""
    # Summary on one line: the excerpt may span a heading and its paragraph.
    item: dict[str, Any] = {"Id": hit.id, "Title": hit.title, "Summary": " ".join(hit.summary.split())}
    if hit.publish_time is not None:
        item["PublishTime"] = hit.publish_time
    if hit.url:
        item["Url"] = hit.url
    if hit.cover_image is not None and hit.cover_image.url:
        cover: dict[str, Any] = {"Url": hit.cover_image.url}
        if hit.cover_image.height is not None:
            cover["Height"] = hit.cover_image.height
        if hit.cover_image.width is not None:
            cover["Width"] = hit.cover_image.width
        item["CoverImage"] = cover
    item["KnowledgeContent"] = hit.content
    return item


def success_body(hits: list[Hit]) -> bytes:
    """The compact UTF-8 success envelope: {"Ret":0,"Msg":"success","Result":[...]}."""
    seen: set[str] = set()
    items = []
    for h in hits:
        # A repeated Id makes the agent drop content (the 联网问答Agent callback spec "Id: 不可重复").
        if h.id in seen:
            continue
        seen.add(h.id)
        items.append(result_item(h))
    return orjson.dumps({"Ret": 0, "Msg": "success", "Result": items})


def error_body(err: CallbackError) -> bytes:
    """The failure envelope: same shape, non-zero Ret, short safe Msg, empty Result."""
    return orjson.dumps({"Ret": err.ret, "Msg": err.message, "Result": []})
