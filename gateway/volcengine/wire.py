"""The Volcengine knowledge callback's wire format (seed 003): parse the Body, shape the answer.

Request Body: {"FirstLevelId": string, "SecondLevelId": string, "Query": string, "Limit": number}.
Response: {"Ret": number, "Msg": string, "Result": [item...]}, item fields Id, Title,
Summary, PublishTime (unix s), Url, CoverImage {Height, Width, Url}, KnowledgeContent.
Optional fields are omitted when unknown rather than faked.
"""

from __future__ import annotations

from typing import Any

import orjson

from gateway.core.config import SearchConfig
from gateway.core.errors import CallbackError, MalformedRequest
from gateway.core.types import CallbackRequest
from indexes.types import Hit


def parse_body(body: bytes, search: SearchConfig) -> CallbackRequest:
    """Parse and validate the raw body (already signature-verified) into a CallbackRequest.

    body: raw bytes, UTF-8 JSON object. Numbers for FirstLevelId/SecondLevelId are taken as
    their decimal string; Limit absent or null → search.default_limit; Limit above
    search.max_limit → clamped. Raises MalformedRequest with one reason per problem
    (body_not_utf8, body_not_json, body_not_object, field_missing, field_type,
    query_empty, query_too_long, limit_invalid, level_id_invalid).
    """
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        raise MalformedRequest("body_not_utf8") from None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise MalformedRequest("body_not_json") from None
    if not isinstance(data, dict):
        raise MalformedRequest("body_not_object")
    first = _level_id(data, "FirstLevelId", search)
    second = _level_id(data, "SecondLevelId", search)
    if "Query" not in data:
        raise MalformedRequest("field_missing", "field Query is missing")
    query = data["Query"]
    if not isinstance(query, str):
        raise MalformedRequest("field_type", "field Query must be a string")
    if not query.strip():
        raise MalformedRequest("query_empty")
    if len(query) > search.max_query_chars:
        raise MalformedRequest("query_too_long", f"Query exceeds {search.max_query_chars} characters")
    return CallbackRequest(first, second, query.strip(), _limit(data.get("Limit"), search))


def _level_id(data: dict[str, Any], name: str, search: SearchConfig) -> str:
    if name not in data:
        raise MalformedRequest("field_missing", f"field {name} is missing")
    v = data[name]
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise MalformedRequest("field_type", f"field {name} must be a string")
    s = str(v)
    if not s or len(s) > search.max_level_id_chars:
        raise MalformedRequest("level_id_invalid", f"field {name} must be 1-{search.max_level_id_chars} characters")
    return s


def _limit(v: Any, search: SearchConfig) -> int:
    if v is None:
        return search.default_limit
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise MalformedRequest("limit_invalid", "field Limit must be a positive integer")
    if v < 1:
        raise MalformedRequest("limit_invalid", "field Limit must be a positive integer")
    return min(v, search.max_limit)


def result_item(hit: Hit) -> dict[str, Any]:
    """One Result item (seed 003 "Result") from a search hit; unknown optional fields omitted."""
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
        # A repeated Id makes the agent drop content (seed 003 "Id: 不可重复").
        if h.id in seen:
            continue
        seen.add(h.id)
        items.append(result_item(h))
    return orjson.dumps({"Ret": 0, "Msg": "success", "Result": items})


def error_body(err: CallbackError) -> bytes:
    """The failure envelope: same shape, non-zero Ret, short safe Msg, empty Result."""
    return orjson.dumps({"Ret": err.ret, "Msg": err.message, "Result": []})
