"""Reading request bodies with a size cap and a deadline, for every endpoint.

A client that sends too much, or too slowly (a stalled or slow-drip upload), must never
hold a worker: the body is read as it arrives, the read stops as soon as the cap is
passed, and the whole body must arrive within the deadline. Each endpoint maps
`BodyLimitExceeded` to its own documented error code.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any


class BodyLimitExceeded(Exception):
    """kind: 'too_large' (more than max_bytes) or 'timeout' (not complete within timeout s)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


async def asgi_chunks(receive: Any) -> AsyncIterator[bytes]:
    """The body parts of a raw ASGI request, until the last one or a disconnect."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        yield message.get("body", b"")
        if not message.get("more_body", False):
            return


async def read_limited(chunks: AsyncIterable[bytes], max_bytes: int, timeout: float | None) -> bytes:
    """The whole body from `chunks`: at most `max_bytes` bytes, within `timeout` seconds.

    Raises BodyLimitExceeded('too_large') as soon as the running total passes the cap (the
    rest is not read), BodyLimitExceeded('timeout') when the body is not complete in time.
    """
    parts: list[bytes] = []
    total = 0
    try:
        async with asyncio.timeout(timeout):
            async for part in chunks:
                total += len(part)
                if total > max_bytes:
                    raise BodyLimitExceeded("too_large", f"body exceeds {max_bytes} bytes")
                parts.append(part)
    except TimeoutError:
        raise BodyLimitExceeded("timeout", f"the body did not arrive within {timeout:g} s") from None
    return b"".join(parts)


JSON_TYPES = frozenset({"application/json", "text/json"})


def json_media_problem(content_type: str | None, content_encoding: str | None) -> tuple[str, str] | None:
    """Why a body with these headers is not plain UTF-8 JSON we accept, or None.

    Returns ('encoding', message) for a Content-Encoding other than identity (we never
    inflate), ('type', message) for a Content-Type other than application/json or text/json
    or a charset other than utf-8. An absent Content-Type is accepted.
    """
    if content_encoding is not None and content_encoding.strip().lower() not in ("", "identity"):
        return "encoding", "Content-Encoding must be identity"
    if content_type is None:
        return None
    mime, _, params = content_type.partition(";")
    if mime.strip().lower() not in JSON_TYPES:
        return "type", "Content-Type must be application/json"
    for p in params.split(";"):
        k, _, v = p.partition("=")
        if k.strip().lower() == "charset" and v.strip().strip('"').lower() not in ("utf-8", "utf8"):
            return "type", "charset must be utf-8"
    return None

