"""gateway/serve/app.py: readiness (/readyz) covers every index the config routes to."""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.config import Config
from gateway.core.replay import MemoryNonceStore
from gateway.serve.app import create_app
from indexes.store import RELOAD_CHECK_SECONDS, IndexStore
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
async def test_readyz_names_an_agent_route_whose_index_is_missing_and_stays_ready(tmp_path: Path,
                                                                                 docs_index: Path) -> None:
    # One route to an index not built made /readyz 503 for every tenant and wing.
    r = await readyz(tmp_path, docs_index, {"handbook": {"index": "docs"}, "wiki": {"index": "not-built-yet"}})
    assert r.status_code == 200
    body = r.json()
    assert (body["status"], body["readiness"]) == ("ready", "any")
    assert body["problems"] == ["agent route wiki: index not-built-yet unavailable (missing on disk)"]
    commit = IndexStore(docs_index).open("docs").commit  # the commit each route serves: '{opstamp}-{12 hex}'
    assert commit is not None and re.fullmatch(r"[0-9]+-[0-9a-f]{12}", commit)
    assert body["routes"] == [
        {"kind": "tenant", "route": "acme a/b", "index": "docs", "state": "ok", "problem": None, "commit": commit},
        {"kind": "agent", "route": "handbook", "index": "docs", "state": "ok", "problem": None, "commit": commit},
        {"kind": "agent", "route": "wiki", "index": "not-built-yet", "state": "unavailable",
         "problem": "missing on disk", "commit": None}]
    assert body["config"] == {"file": None, "serving": "file", "last_refusal": None}


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_other_methods_on_health_endpoints_are_a_json_405_with_allow(tmp_path: Path, docs_index: Path,
                                                                           path: str) -> None:
    # They were Starlette's plain-text "Method Not Allowed" beside JSON answers.
    app = create_app(agent_routes_config(tmp_path, docs_index, {"handbook": {"index": "docs"}}),
                     nonces=MemoryNonceStore())
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            for method in ("PUT", "DELETE", "PATCH", "OPTIONS", "POST"):
                r = await c.request(method, path)
                assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD", (method, r.text)
                assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
                assert r.json() == {"error": "method_not_allowed", "allow": ["GET", "HEAD"],
                                    "message": f"{method} is not allowed on {path}; use GET or HEAD"}
            assert (await c.get(path)).status_code == 200
            head = await c.head(path)
            assert head.status_code == 200 and head.content == b""


@pytest.mark.anyio
async def test_readyz_is_not_ready_when_no_route_can_serve(tmp_path: Path, docs_index: Path) -> None:
    acme = tenant("acme", verify="report", routes=[("a", "b", "gone")])
    cfg = parse(config(tmp_path, tenants=[acme], indexes=docs_index, agent={"routes": {"w": {"index": "nope"}}}),
                tmp_path, {})
    app = create_app(cfg, nonces=MemoryNonceStore())
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            r = await c.get("/readyz")
    assert (r.status_code, r.json()["status"]) == (503, "not_ready")
    assert r.json()["problems"] == ["agent route w: index nope unavailable (missing on disk)",
                                    "route acme a/b: index gone unavailable (missing on disk)"]


@pytest.mark.anyio
async def test_the_strict_readiness_is_not_ready_while_any_route_is_broken(tmp_path: Path, docs_index: Path) -> None:
    acme = tenant("acme", verify="report", routes=[("a", "b", "docs")])
    data = config(tmp_path, tenants=[acme], indexes=docs_index, server={"readiness": "all"},
                  agent={"routes": {"handbook": {"index": "docs"}, "wiki": {"index": "not-built-yet"}}})
    app = create_app(parse(data, tmp_path, {}), nonces=MemoryNonceStore())
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            r = await c.get("/readyz")
    assert (r.status_code, r.json()["status"], r.json()["readiness"]) == (503, "not_ready", "all")
    assert r.json()["problems"] == ["agent route wiki: index not-built-yet unavailable (missing on disk)"]


def test_an_unknown_readiness_mode_is_refused_naming_the_key(tmp_path: Path, docs_index: Path) -> None:
    from gateway.core.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse(config(tmp_path, indexes=docs_index, server={"readiness": "some"}), tmp_path, {})
    assert err.value.key == "server.readiness"


@pytest.mark.anyio
async def test_readyz_ready_when_every_agent_route_has_its_index(tmp_path: Path, docs_index: Path) -> None:
    r = await readyz(tmp_path, docs_index,
                     {"handbook": {"index": "docs"}, "later": {"index": "nope", "enabled": False}})
    assert (r.status_code, r.json()["status"]) == (200, "ready")
    assert r.json()["routes"][-1] == {"kind": "agent", "route": "later", "index": "nope", "state": "disabled",
                                      "problem": None, "commit": None}


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
    # Still ready ("any"): this worker answers; the route says a restarted one could not.
    # Each stale route is named, as the unavailable ones are (it was "index docs …" alone).
    assert (r.status_code, r.json()["problems"]) == (200, [gone] + [
        f"agent route {name}: index docs damaged on disk; answers come from the copy opened before"
        for name in ("ops", "strict", "support")])
    assert {x["state"] for x in r.json()["routes"] if x["index"] == "docs"} == {"stale", "disabled"}
    meta.write_bytes(whole)  # restored: the next reload succeeds, readiness comes back
    await after_reload_check()
    assert await answered()
    assert (await e.http.get("/readyz")).json()["problems"] == [gone]
    shutil.rmtree(root / "indexes" / "docs")
    await after_reload_check()
    assert await answered()
    assert (await e.http.get("/readyz")).json()["problems"] == [gone] + [
        f"agent route {name}: index docs missing on disk; answers come from the copy opened before"
        for name in ("ops", "strict", "support")]


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


@pytest.mark.anyio
async def test_readyz_says_how_to_add_vectors_to_an_index_built_lexical(tmp_path: Path, docs_index: Path) -> None:
    # The suite's shared index was built lexical (no vectors): it serves, and /readyz names the next step.
    r = await readyz(tmp_path, docs_index, {"handbook": {"index": "docs"}})
    assert r.status_code == 200 and r.json()["status"] == "ready"
    assert [n for n in r.json()["notes"] if not n.startswith("tenant ")] == [  # this config's tenant has no key
        "index docs is lexical: built before hybrid was the default, it has no vectors; add them with "
        "`kbgate index embed --config FILE --index docs` and restart, or set [indexes.docs] dense = \"none\" "
        "to keep it lexical"]


@pytest.mark.anyio
async def test_readyz_waits_until_a_hybrid_indexs_model_has_answered_once(tmp_path: Path) -> None:
    # A real embedding service whose answers take 1.5 s (a model still loading): the replica is
    # not ready until the warm-up embedding came back, whatever server.readiness says.
    from indexes.dense.config import DenseConfig
    from indexes.dense.index import HybridStore
    from tests.support.documents import HYBRID_DOCS
    from tests.support.embedding_server import running
    from tests.support.harness import free_port

    with running(free_port()) as emb:
        url = f"{emb}/v1/embeddings"
        dense = DenseConfig(provider="openai", model="use-multilingual-v3", url=url)
        HybridStore(tmp_path / "indexes", dense={"docs": dense}).create_or_open_for_write("docs").ingest(
            HYBRID_DOCS, progress=False)
        httpx.post(f"{emb}/control", json={"delay": 1.5}).raise_for_status()
        acme = tenant("acme", verify="report", routes=[("a", "b", "docs")])
        cfg = parse(config(tmp_path, tenants=[acme], indexes=tmp_path / "indexes",
                           dense={"docs": {"provider": "openai", "model": "use-multilingual-v3", "url": url}}),
                    tmp_path, {})
        app = create_app(cfg, nonces=MemoryNonceStore())
        async with LifespanManager(app) as m:  # type: ignore[arg-type]
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
                first = await c.get("/readyz")
                assert first.status_code == 503 and first.json()["status"] == "not_ready"
                assert first.json()["problems"] == [
                    "route acme a/b: index docs is loading its embedding model (not ready until it answers)"]
                assert first.json()["routes"][0]["state"] == "warming"
                for _ in range(100):  # polled up to 10 s
                    later = await c.get("/readyz")
                    if later.status_code == 200:
                        break
                    await asyncio.sleep(0.1)
                assert later.status_code == 200 and later.json()["routes"][0]["state"] == "ok"
