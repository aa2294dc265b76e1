"""Shared fixtures: a real Redis, the one test index, the anyio backend, the agent app.

Redis, in order: $REDIS_URL; else 127.0.0.1:6379 if it answers; else a throwaway
`redis-server` started on a free port for this session; else the run stops with a
clear message (no fake Redis, ever).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import redis
from asgi_lifespan import LifespanManager

from gateway.core.clock import FixedClock
from gateway.core.config import Config
from gateway.core.replay import RedisNonceStore
from gateway.core.types import Clock, NonceStore
from gateway.serve.app import Gateway, create_app
from indexes.store import IndexStore
from tests.support.configs import NOW
from tests.support.console import ENGLISH
from tests.support.documents import INDEXES
from tests.support.harness import free_port
from tests.support.milvus_server import MilvusLite
from tests.support.redis_procs import RedisClusterProcs

# The agent endpoints' fixtures (env, root) for the modules that use them.
pytest_plugins = ("tests.support.agent_env",)


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
    except (redis.RedisError, OSError):
        return False


@pytest.fixture(name="redis_url", scope="session")
def _redis_url() -> Iterator[str]:
    env = os.environ.get("REDIS_URL")
    if env:
        if not _answers(env):
            pytest.exit(f"REDIS_URL={env} does not answer PING", returncode=3)
        yield env
        return
    # The machine's usual Redis (overridable so the fallback below can itself be tested).
    local = os.environ.get("KBGATE_TEST_LOCAL_REDIS", "redis://127.0.0.1:6379/15")
    if _answers(local):
        yield local
        return
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.exit(
            "No Redis: set REDIS_URL, start Redis on 127.0.0.1:6379, or install redis-server "
            "(apt-get install redis-server) so the tests can start a throwaway one.",
            returncode=3,
        )
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="kbgate-redis-")
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        if _answers(url):
            break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.exit(f"a throwaway redis-server on port {port} did not start", returncode=3)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(name="redis_cluster", scope="session")
def _redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcs]:
    """A real Redis Cluster (three primaries, three replicas: `redis-server` processes on free
    ports, tests/support/redis_procs.py) for the tests that need one; never failed over (the
    failover test starts its own). Started on first use, stopped at the end of the session."""
    cluster = RedisClusterProcs(tmp_path_factory.mktemp("redis-cluster")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(name="milvus", scope="session")
def _milvus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MilvusLite]:
    """A real Milvus Lite server (tests/support/milvus_server.py) for the tests of indexes served
    by Milvus, started on first use and stopped at the end of the session. Each test uses its
    own collections; the fault tests start their own server, which they stop and restart."""
    with MilvusLite(tmp_path_factory.mktemp("milvus") / "data") as server:
        yield server


@pytest.fixture(name="redis_client")
def _redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(name="key_prefix")
def _key_prefix() -> str:
    """A Redis key prefix unique to one test, so tests never see each other's nonces."""
    return f"kbgate-test-{os.getpid()}-{time.monotonic_ns()}"


@pytest.fixture(name="anyio_backend", scope="session")
def _anyio_backend() -> str:
    """Every async test runs on asyncio (the gateway's loop: uvloop is asyncio's)."""
    return "asyncio"


@pytest.fixture(name="docs_index", scope="session")
def _docs_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder (indexes.dir) holding the test indexes ('kb' and 'docs', tests.support.documents),
    built once. Read-only for the tests: one that writes to an index copies it first (`private_index`)."""
    root = tmp_path_factory.mktemp("indexes")
    for name, docs in INDEXES.items():
        IndexStore(root).create_or_open_for_write(name).ingest(docs, progress=False)
    return root


@pytest.fixture(name="private_index")
def _private_index(docs_index: Path, tmp_path: Path) -> Path:
    """A copy of the test index for this test only (tmp_path/indexes), free to change."""
    shutil.copytree(docs_index, tmp_path / "indexes")
    return tmp_path / "indexes"


Started = tuple[httpx.AsyncClient, Gateway, Clock]


@pytest.fixture(name="start_app")
async def _start_app(redis_url: str) -> AsyncIterator[Callable[..., Awaitable[Started]]]:
    """start_app(config, *, clock=, nonces=) → (client, app, clock): the app in-process under its
    lifespan (so Redis and indexes open as in production). clock: fixed at NOW unless given
    (SYSTEM_CLOCK for requests signed with the wall clock); nonces: a real Redis nonce store
    unless given. Every app started is shut down when the test ends."""
    managers: list[LifespanManager] = []

    async def start(cfg: Config, *, clock: Clock | None = None, nonces: NonceStore | None = None) -> Started:
        clock = clock or FixedClock(float(NOW))
        app = create_app(cfg, clock=clock, nonces=nonces or RedisNonceStore(redis_url, 1.0, clock))
        manager = LifespanManager(app)  # type: ignore[arg-type]
        await manager.__aenter__()
        managers.append(manager)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate",
                                   headers=ENGLISH)
        return client, app, clock

    yield start
    for m in managers:
        await m.__aexit__(None, None, None)
