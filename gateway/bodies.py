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
