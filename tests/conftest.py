"""Shared fixtures: a real Redis, free ports, a running kbgate, the shared corpora.

Redis, in order: $REDIS_URL; else 127.0.0.1:6379 if it answers; else a throwaway
`redis-server` started on a free port for this session; else the run stops with a
clear message (no fake Redis, ever).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

# The agent endpoints' fixtures (env, root, index_root, anyio_backend) for the modules that use them.
pytest_plugins = ("tests.agent_env",)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
CORPORA = SHARED / "corpora"
CASES = SHARED / "cases"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


@pytest.fixture(name="redis_client")
def _redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture(name="key_prefix")
def _key_prefix() -> str:
    """A Redis key prefix unique to one test, so tests never see each other's nonces."""
    return f"kbgate-test-{os.getpid()}-{time.monotonic_ns()}"


def corpora_or_skip() -> Path:
    """The shared corpora folder; tests needing it skip only when it is absent."""
    if not CORPORA.is_dir():
        pytest.skip("../shared/corpora is absent")
    return CORPORA


def kbgate_cmd() -> list[str]:
    return [sys.executable, "-m", "gateway.cli"]


# Agent Access tool API contracts (gateway/agent/schemas/*.json, seed 002): the files refer to
# each other by $id, so validators need a registry holding all of them.
ACCESS_SCHEMAS = (
    "AgentToolRequest", "AgentToolResult", "ErrorObject", "EffectiveScope", "Citation",
    "SearchResult", "Answer", "Page", "ContextPack", "FeedbackRequest",
    "ImprovementTaskRequest", "WriteResult", "ToolInputs",
)


def access_validator(name: str):  # type: ignore[no-untyped-def]
    """A Draft 2020-12 validator for the access contract `name`, with every $ref resolvable."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    from gateway.agent.schemas import load

    registry = Registry().with_resources(
        (load(n)["$id"], Resource.from_contents(load(n))) for n in ACCESS_SCHEMAS)
    return Draft202012Validator(load(name), registry=registry, format_checker=Draft202012Validator.FORMAT_CHECKER)
