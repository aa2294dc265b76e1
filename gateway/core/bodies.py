"""Reading request bodies with a size cap and a deadline, for every endpoint.

Rationale: docs/design-notes.md, "gateway/core/bodies.py".
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from gateway.core.validate import Invalid, Problem, ProblemError, fail, json_object

JSON_TYPES = frozenset({"application/json", "text/json"})


async def asgi_chunks(receive: Any) -> AsyncIterator[bytes]:
    """The body parts of a raw ASGI request, until the last one or a disconnect."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def read_limited(chunks: AsyncIterable[bytes], max_bytes: int, timeout: float | None,
                       invalid: Invalid = ProblemError) -> bytes:
    """The whole body from `chunks`: at most `max_bytes` bytes, within `timeout` seconds.

    Raises invalid(Problem('body', 'too_large')) as soon as the running total passes the cap
    (the rest is not read), invalid(Problem('body', 'timeout')) when the body is not
    complete in time.
    """
    parts: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(timeout):
            async for part in chunks:
                total += len(part)
                if total > max_bytes:
                    fail(invalid, "body", "too_large", f"exceeds {max_bytes} bytes")
                parts.append(part)
    except TimeoutError:
        fail(invalid, "body", "timeout", f"did not arrive within {timeout:g} s")
    return b"".join(parts)


def json_media_problem(content_type: str | None, content_encoding: str | None) -> Problem | None:
    """Why a body with these headers is not plain UTF-8 JSON we accept, or None.

    A Problem of kind 'media' keyed 'Content-Encoding' for an encoding other than identity
    (we never inflate), keyed 'Content-Type' for a type other than application/json or
    text/json or a charset other than utf-8. An absent Content-Type is accepted.
    """
    if content_encoding is not None and content_encoding.strip().lower() not in ("", "identity"):
        return Problem("Content-Encoding", "media", "must be identity")
    if content_type is None:
        return None
    mime, _, params = content_type.partition(";")
    if mime.strip().lower() not in JSON_TYPES:
        return Problem("Content-Type", "media", "must be application/json")
    for p in params.split(";"):
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset" and v.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return Problem("Content-Type", "media", "must have charset utf-8")
    return None


async def read_json_object(chunks: AsyncIterable[bytes], content_type: str | None, content_encoding: str | None,
                           max_bytes: int, timeout: float | None, invalid: Invalid) -> dict[str, Any]:
    """A bounded JSON-object body: media check, then `read_limited`, then `json_object`.

    Raises invalid(Problem) of kind media, too_large, timeout, utf8, json or object.
    """
    problem = json_media_problem(content_type, content_encoding)
    if problem is not None:
        raise invalid(problem)
    return json_object(await read_limited(chunks, max_bytes, timeout, invalid), invalid)
