"""The callback app in-process: tenant acme with its two keys, the one test index, a real
Redis nonce store, the clock fixed at NOW (so tolerance boundaries are exact)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.clock import FixedClock
from gateway.core.config import Config
from gateway.core.replay import RedisNonceStore
from gateway.serve.app import Gateway, create_app
from tests.support.callbacks import NOW, callback_config

Factory = Callable[..., Any]


@pytest.fixture(name="start")
async def _start(redis_url: str) -> AsyncIterator[Callable[[Config], Any]]:
    """start(config) → (client, app): the app running under its lifespan at NOW."""
    managers: list[LifespanManager] = []

    async def start(cfg: Config) -> tuple[httpx.AsyncClient, Gateway]:
        clock = FixedClock(float(NOW))
        app = create_app(cfg, clock=clock, nonces=RedisNonceStore(redis_url, 1.0, clock))
        manager = LifespanManager(app)  # type: ignore[arg-type]
        await manager.__aenter__()
        managers.append(manager)
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate")
        c.clock = clock  # type: ignore[attr-defined]
        return c, app

    yield start
    for m in managers:
        await m.__aexit__(None, None, None)


@pytest.fixture(name="client")
def _client(start: Factory, docs_index: Path, redis_url: str, key_prefix: str) -> Factory:
    """client(**callback_config options) → an httpx client of a fresh app (its clock as .clock)."""

    async def factory(**kw: Any) -> httpx.AsyncClient:
        replay = {"redis_url": redis_url, "key_prefix": key_prefix, **kw.pop("replay", {})}
        c, _ = await start(callback_config(docs_index, replay=replay, **kw))
        return c  # type: ignore[no-any-return]

    return factory


@pytest.fixture(name="gateway")
def _gateway(start: Factory, docs_index: Path, redis_url: str, key_prefix: str) -> Factory:
    """gateway(verify) → (client, app) of tenant acme in that mode."""

    async def factory(verify: str) -> tuple[httpx.AsyncClient, Gateway]:
        return await start(callback_config(docs_index, verify=verify,  # type: ignore[no-any-return]
                                           replay={"redis_url": redis_url, "key_prefix": key_prefix}))

    return factory
