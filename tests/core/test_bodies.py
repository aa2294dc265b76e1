"""gateway/core/bodies.py: size cap and deadline for every request body."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from gateway.core.bodies import asgi_chunks, read_limited
from gateway.core.validate import ProblemError


async def drip(parts: list[bytes], pause: float) -> AsyncIterator[bytes]:
    for p in parts:
        await asyncio.sleep(pause)
        yield p


def test_whole_body_within_limits() -> None:
    assert asyncio.run(read_limited(drip([b"ab", b"cd"], 0), 4, 1.0)) == b"abcd"


def test_too_large_stops_reading_at_once() -> None:
    seen: list[bytes] = []

    async def parts() -> AsyncIterator[bytes]:
        for p in (b"abc", b"def", b"never read"):
            seen.append(p)
            yield p

    with pytest.raises(ProblemError) as exc:
        asyncio.run(read_limited(parts(), 4, 1.0))
    assert exc.value.problem.kind == "too_large"
    assert seen == [b"abc", b"def"]


def test_slow_drip_times_out() -> None:
    async def go() -> float:
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        with pytest.raises(ProblemError) as exc:
            await read_limited(drip([b"x"] * 100, 0.05), 1000, 0.3)
        assert exc.value.problem.kind == "timeout" and "0.3 s" in exc.value.problem.message
        return loop.time() - t0

    assert asyncio.run(go()) < 1.0


def test_asgi_chunks_stop_at_last_part_and_disconnect() -> None:
    msgs = [{"type": "http.request", "body": b"a", "more_body": True},
            {"type": "http.request", "body": b"b", "more_body": False},
            {"type": "http.request", "body": b"never", "more_body": False}]

    async def receive() -> dict[str, object]:
        return msgs.pop(0)

    async def collect() -> list[bytes]:
        return [p async for p in asgi_chunks(receive)]

    assert asyncio.run(collect()) == [b"a", b"b"]
    msgs[:] = [{"type": "http.disconnect"}]
    assert asyncio.run(collect()) == []


@pytest.mark.parametrize(("ctype", "ok"), [
    (None, True), ("application/json", True), ("TEXT/JSON", True), ("application/json; charset=utf-8", True),
    ("application/json; charset=UTF8", True), ('application/json; charset="utf-8"', True),
    # unknown parameters are ignored (docs/volcengine-console.md, "Decisions where the callback spec is silent")
    ("application/json; version=2", True),
    ("application/json; charset=latin-1", False), ("text/plain", False), ("application/jsonx", False),
])
def test_json_media_rule_is_the_documented_one(ctype: str | None, ok: bool) -> None:
    from gateway.core.bodies import json_media_problem

    assert (json_media_problem(ctype, None) is None) == ok
