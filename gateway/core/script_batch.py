"""Redis script calls of one worker sent together: one round trip for the calls that wait at once.

Rationale: docs/design-notes.md, "gateway/core/script_batch.py".
"""

from __future__ import annotations

import asyncio
from typing import Any

from redis.asyncio.client import Redis
from redis.asyncio.cluster import RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError
from redis.typing import EncodableT

__all__ = ["MAX_IN_FLIGHT", "ScriptBatcher"]

MAX_IN_FLIGHT = 2  # round trips of one batcher on the wire at once

Args = list[EncodableT]
_Call = tuple[AsyncScript, str, Args, "asyncio.Future[Any]"]


class ScriptBatcher:
    """Script calls on `client` (module docstring). One per client; used from one event loop."""

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._client = client
        self._alone = isinstance(client, RedisCluster)  # no script pipelines on a cluster (docstring)
        self._waiting: list[_Call] = []
        self._in_flight = 0
        self._drainers: set[asyncio.Task[None]] = set()
        self.round_trips = 0  # pipelines and lone calls sent (tests, measurements)

    async def call(self, script: AsyncScript, key: str, args: Args) -> Any:
        """`script(keys=[key], args=args)`'s reply, sent alone or with the calls waiting with it.
        Raises what the script call raises (RedisError, OSError)."""
        if self._alone:
            self.round_trips += 1
            return await script(keys=[key], args=args)
        if self._in_flight >= MAX_IN_FLIGHT:
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            self._waiting.append((script, key, args, fut))
            return await fut
        self._in_flight += 1
        try:
            self.round_trips += 1
            return await script(keys=[key], args=args)
        finally:
            self._hand_over()

    def _hand_over(self) -> None:
        """A round trip came back: its slot sends what waited meanwhile (in a task of its own, so
        the caller whose call it carried returns now), or frees up."""
        if self._waiting:
            task = asyncio.get_running_loop().create_task(self._drain(), name="kbgate-redis-scripts")
            self._drainers.add(task)
            task.add_done_callback(self._drainers.discard)
        else:
            self._in_flight -= 1

    async def _drain(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                await self._send(batch)
        finally:
            self._in_flight -= 1

    async def _send(self, batch: list[_Call]) -> None:
        self.round_trips += 1
        pipe = self._client.pipeline(transaction=False)
        for script, key, args, _ in batch:
            pipe.evalsha(script.sha, 1, key, *args)
        try:
            replies = await pipe.execute(raise_on_error=False)
        except BaseException as exc:  # the whole round trip failed: every call of it fails alike
            for *_, fut in batch:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
            if not isinstance(exc, Exception):
                raise
            return
        for (script, key, args, fut), reply in zip(batch, replies, strict=True):
            if isinstance(reply, NoScriptError):  # Redis lost its scripts (a restart): load and run it alone
                try:
                    reply = await script(keys=[key], args=args)
                except Exception as exc:  # noqa: BLE001 - handed to the caller
                    reply = exc
            if fut.done():  # its caller gave up (its own timeout)
                continue
            if isinstance(reply, Exception):
                fut.set_exception(reply)
            else:
                fut.set_result(reply)
