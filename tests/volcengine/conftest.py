"""The callback app in-process: tenant acme with its two keys over the one test index
(tests.support.callbacks.callback_config), started by the root conftest's `start_app`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.serve.app import Gateway
from tests.support.callbacks import callback_config
from tests.support.configs import NOW

Factory = Callable[..., Any]


@pytest.fixture(name="client")
def _client(start_app: Factory, docs_index: Path, redis_url: str, key_prefix: str) -> Factory:
    """client(**callback_config options) → an httpx client of a fresh app (its clock as .clock)."""

    async def factory(**kw: Any) -> httpx.AsyncClient:
        replay = {"redis_url": redis_url, "key_prefix": key_prefix, **kw.pop("replay", {})}
        c, _, clock = await start_app(callback_config(docs_index, replay=replay, **kw))
        c.clock = clock
        return c  # type: ignore[no-any-return]

    return factory


@pytest.fixture(name="gateway")
def _gateway(start_app: Factory, docs_index: Path, redis_url: str, key_prefix: str) -> Factory:
    """gateway(verify) → (client, app) of tenant acme in that mode (a report mode ends an hour
    after the app's fixed clock, NOW, and the config is loaded at NOW)."""

    async def factory(verify: str) -> tuple[httpx.AsyncClient, Gateway]:
        end = dt.datetime.fromtimestamp(NOW + 3600, dt.UTC)
        c, app, _ = await start_app(callback_config(docs_index, verify=verify, report_until=end, now=NOW,
                                                    replay={"redis_url": redis_url, "key_prefix": key_prefix}))
        return c, app

    return factory
