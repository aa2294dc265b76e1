"""gateway/serve/app.py: readiness (/readyz) covers every index the config routes to."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.config import Config
from gateway.core.replay import MemoryNonceStore
from gateway.serve.app import create_app
from indexes.store import RELOAD_CHECK_SECONDS
from tests.support.agent_env import TOKEN_ALICE
from tests.support.configs import config, parse, tenant


def agent_routes_config(root: Path, indexes: Path, agent_routes: dict[str, dict[str, object]]) -> Config:
    """Tenant acme (report mode, a/b → docs) and the given [agent.routes.*] over the test index."""
    acme = tenant("acme", verify="report", routes=[("a", "b", "docs")])
    return parse(config(root, tenants=[acme], indexes=indexes, agent={"routes": agent_routes}), root, {})


async def readyz(tmp_path: Path, indexes: Path, agent_routes: dict[str, dict[str, object]]) -> httpx.Response:
    app = create_app(agent_routes_config(tmp_path, indexes, agent_routes), nonces=MemoryNonceStore())
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            return await c.get("/readyz")


@pytest.mark.anyio
async def test_readyz_names_an_agent_route_whose_index_is_missing(tmp_path: Path, docs_index: Path) -> None:
    r = await readyz(tmp_path, docs_index, {"handbook": {"index": "docs"}, "wiki": {"index": "not-built-yet"}})
    assert r.status_code == 503
    assert r.json() == {"status": "not_ready", "problems": [
        "agent route wiki: index not-built-yet unavailable (missing on disk)"]}


@pytest.mark.anyio
async def test_readyz_ready_when_every_agent_route_has_its_index(tmp_path: Path, docs_index: Path) -> None:
    r = await readyz(tmp_path, docs_index,
                     {"handbook": {"index": "docs"}, "later": {"index": "nope", "enabled": False}})
    assert (r.status_code, r.json()["status"]) == (200, "ready")


# ------------------------------------------------------------------ paths no endpoint serves

EVIL = "evil.example.com"
UNSERVED = [
    ("POST", "/dify/retrieval/"),
    ("POST", "/agent-access/v1/tools/search/"),
    ("POST", "/agent-api/v1/workspaces/support/knowledge/search/"),
    ("GET", "/agent-api/v1/workspaces/support/knowledge/capabilities/"),
    ("POST", "/mcp//"),
    ("GET", "/healthz/"),
    ("GET", "/readyz/"),
    ("GET", "/metrics/"),
    ("GET", "/admin/deliveries.json/"),
    ("POST", "/admin/login/"),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "path"), UNSERVED)
async def test_a_trailing_slash_is_a_plain_404_never_a_redirect_built_from_host(env: Any, method: str,
                                                                                path: str) -> None:
    # Starlette's Router answered these with 307 Location: http://<Host header><path without />.
    # (/mcp and /mcp/ both stay answered: tests/mcp/test_transport.py.)
    e = await env()
    r = await e.http.request(method, path, headers={"host": EVIL, "authorization": f"Bearer {TOKEN_ALICE}",
                                                    "content-type": "application/json"}, content=b"{}")
    assert (r.status_code, r.text, r.headers["content-type"]) == (404, "Not Found", "text/plain; charset=utf-8")
    assert "location" not in r.headers and EVIL not in str(r.headers)
    assert r.headers["cache-control"] == "no-store"



# ------------------------------------------------------------------ an index damaged under a running worker


@pytest.mark.anyio
async def test_an_index_damaged_while_serving_still_answers_and_readyz_names_it(
        env: Any, root: Path, caplog: pytest.LogCaptureFixture) -> None:
    # Overwriting meta.json (or deleting the folder) used to cost one 503 50302 per worker, after
    # which the worker answered from the reader it had while /readyz said ready.
    e = await env()
    gone = "agent route gone: index absent unavailable (missing on disk)"  # the env's route to no index
    assert (await e.http.get("/readyz")).json()["problems"] == [gone]

    async def answered() -> bool:
        r = await e.search()
        return r.status_code == 200 and bool(r.json()["hints"])

    assert await answered()
    meta = root / "indexes" / "docs" / "meta.json"
    whole = meta.read_bytes()

    async def after_reload_check() -> None:  # the reader looks at meta.json at most every 0.5 s
        await asyncio.sleep(RELOAD_CHECK_SECONDS * 1.5)

    meta.write_text("{garbage")
    await after_reload_check()
    with caplog.at_level(logging.WARNING, logger="kbgate.runtime"):
        for _ in range(3):
            assert await answered()  # from the files the worker mapped before
    [failed] = [r for r in caplog.records if r.getMessage().startswith("index reload failed")]
    assert failed.index == "docs"  # type: ignore[attr-defined]
    r = await e.http.get("/readyz")
    assert (r.status_code, r.json()["problems"]) == (503, [
        gone, "index docs damaged on disk; answers come from the copy opened before"])
    meta.write_bytes(whole)  # restored: the next reload succeeds, readiness comes back
    await after_reload_check()
    assert await answered()
    assert (await e.http.get("/readyz")).json()["problems"] == [gone]
    shutil.rmtree(root / "indexes" / "docs")
    await after_reload_check()
    assert await answered()
    assert (await e.http.get("/readyz")).json()["problems"] == [
        gone, "index docs missing on disk; answers come from the copy opened before"]


@pytest.mark.anyio
async def test_what_start_up_made_is_frozen_out_of_the_collectors_walks(tmp_path: Path, docs_index: Path) -> None:
    import gc

    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    plain = create_app(agent_routes_config(tmp_path, docs_index, {}), nonces=MemoryNonceStore())
    async with LifespanManager(plain):  # type: ignore[arg-type]
        assert gc.get_freeze_count() == 0  # an app of a test process: nothing frozen
    app = create_app(agent_routes_config(tmp_path, docs_index, {}), nonces=MemoryNonceStore())
    app.freeze_gc = True  # what gateway/serve/asgi.py sets in a worker
    try:
        async with LifespanManager(app):  # type: ignore[arg-type]
            assert gc.get_freeze_count() > 10_000  # modules, models, the config: the worker's lifetime
    finally:
        gc.unfreeze()  # the rest of the suite runs with the collector seeing everything again
