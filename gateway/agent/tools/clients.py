"""What the tool API holds per worker: the Redis client and idempotency store of the write
tools, the issue tracker, the FeedbackBridge, and the HTTP client of an upstream Answer API.

Built on the first tool call that needs them (a worker serving only callbacks never opens
them), from the config of that moment; closed when the worker stops.
"""

from __future__ import annotations

import httpx

from gateway.agent.feedback import FeedbackBridge, IssueTracker
from gateway.agent.feedback.github import GitHubTracker
from gateway.agent.feedback.sqlite import SqliteTracker
from gateway.agent.idempotency import IdempotencyStore
from gateway.core.redis_clients import AsyncRedis, async_client
from gateway.core.runtime import Runtime


class Clients:
    """tracker: SQLite (default) or GitHub. bridge: None without replay.redis_url (the write
    tools need idempotency records). answer_client: None without access.answer.url."""

    def __init__(self, rt: Runtime) -> None:
        cfg = rt.config
        a = cfg.access
        self.redis: AsyncRedis | None = None
        self.bridge: FeedbackBridge | None = None
        tracker: IssueTracker
        if a.tracker == "github":
            assert a.github_repo is not None and a.github_token is not None
            tracker = GitHubTracker(repo=a.github_repo, token=a.github_token, map_path=a.github_map_path,
                                    api_url=a.github_api_url, clock=rt.clock)
        else:
            tracker = SqliteTracker(a.sqlite_path, rt.clock)
        self.tracker = tracker
        if cfg.replay.redis_url:
            self.redis = async_client(cfg.replay.redis_url, cfg.replay.timeout_seconds)
            store = IdempotencyStore(self.redis, cfg.replay.key_prefix, idempotency_ttl=a.idempotency_ttl_seconds,
                                     dedupe_ttl=a.dedupe_ttl_seconds, timeout=cfg.replay.timeout_seconds)
            self.bridge = FeedbackBridge(store, tracker, a.labels)
        self.answer_client = httpx.AsyncClient(timeout=a.answer_timeout_seconds) if a.answer_url else None

    async def close(self) -> None:
        await self.tracker.close()
        if self.redis is not None:
            await self.redis.aclose()
        if self.answer_client is not None:
            await self.answer_client.aclose()


class LazyClients:
    """The worker's Clients, built on first use; `close` closes them if they were built."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._clients: Clients | None = None

    def get(self) -> Clients:
        if self._clients is None:
            self._clients = Clients(self.rt)
        return self._clients

    async def close(self) -> None:
        if self._clients is not None:
            await self._clients.close()
