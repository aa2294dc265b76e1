"""The MCP SDK loads lazily (gateway/mcp/transport.py): importing the app, starting a worker and
refusing requests before the SDK leave no `mcp`/`mcp_types` module loaded; the first call that
reaches the SDK starts it once, however many arrive together; a worker that has not started it
yet serves an MCP client a reload added.
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import orjson
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.config.edit import write_atomically
from gateway.serve.app import create_app
from tests.support.configs import ENV, config, parse, text, write
from tests.support.harness import free_port, serve
from tests.support.mcp_env import TOKEN_ALICE, TOP, connect, mcp_agent_section, payload
from tests.support.paths import ROOT

JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-11-25"}
SDK_MODULES = "sorted(m for m in sys.modules if m in ('mcp', 'mcp_types') or m.startswith(('mcp.', 'mcp_types.')))"


def _fresh(code: str, *args: str) -> Any:
    """What a fresh interpreter running `code` (which ends by printing JSON) printed."""
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env={**ENV, "PATH": "/usr/bin:/bin"},
                          capture_output=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr.decode()[-4000:]
    return orjson.loads(done.stdout.splitlines()[-1])


def test_importing_the_app_loads_no_mcp_module() -> None:
    assert _fresh(f"import json, sys, gateway.serve.app; print(json.dumps({SDK_MODULES}))") == []


def test_the_check_sees_the_sdk_when_it_is_loaded() -> None:
    assert "mcp" in _fresh(f"import json, sys, gateway.mcp.server; print(json.dumps({SDK_MODULES}))")


_WORKER = f"""
import asyncio, json, sys
import httpx
from asgi_lifespan import LifespanManager
from gateway.core.config import load_config
from gateway.serve.app import create_app

JSON = {JSON!r}
BEARER = {{"authorization": "Bearer {TOKEN_ALICE}"}}
LIST = json.dumps({{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}})

async def main():
    app = create_app(load_config(sys.argv[1]))
    out = {{}}
    async with LifespanManager(app) as m:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate") as c:
            evil = {{**JSON, **BEARER, "origin": "https://evil.example"}}
            asks = [("GET", {{}}, LIST), ("POST", JSON, LIST), ("POST", evil, LIST),
                    ("POST", {{**BEARER, "content-type": "text/plain"}}, LIST), ("POST", {{**JSON, **BEARER}}, "[]"),
                    ("POST", {{**JSON, **BEARER}}, '{{"jsonrpc": "2.0", "id": {{}}, "method": "ping"}}')]
            out["refused"] = [(await c.request(m, "/mcp", headers=h, content=b)).status_code for m, h, b in asks]
            out["after_refusals"] = {SDK_MODULES}
            r = await c.post("/mcp", headers={{**JSON, **BEARER}}, content=LIST)
            out["listed"] = [r.status_code, sorted(t["name"] for t in r.json()["result"]["tools"])]
            out["after_call"] = "mcp" in sys.modules
    print(json.dumps(out))

asyncio.run(main())
"""


def test_a_worker_refuses_without_the_sdk_and_loads_it_for_the_first_call(tmp_path: Path, docs_index: Path,
                                                                         redis_url: str) -> None:
    data = config(tmp_path, tenants=[], indexes=docs_index, redis_url=redis_url, key_prefix="kbgate-mcp-lazy",
                  agent=mcp_agent_section(), audit={"sink": "file", "path": str(tmp_path / "audit.jsonl")})
    out = _fresh(_WORKER, str(write(tmp_path / "gateway.toml", data)))
    assert out["refused"] == [405, 401, 403, 415, 400, 400]  # method, token, Origin, media type, batch, id
    assert out["after_refusals"] == []
    assert out["listed"] == [200, ["fetch", "search"]] and out["after_call"] is True


@pytest.mark.anyio
async def test_first_calls_at_once_start_the_sdk_once(tmp_path: Path, docs_index: Path, redis_url: str,
                                                      start_app: Callable[..., Any],
                                                      caplog: pytest.LogCaptureFixture) -> None:
    cfg = parse(config(tmp_path, tenants=[], indexes=docs_index, redis_url=redis_url, key_prefix="kbgate-mcp-lazy",
                       agent=mcp_agent_section()), tmp_path)
    _, app, _ = await start_app(cfg)
    caplog.set_level(logging.INFO, logger="mcp.server.streamable_http_manager")
    found: list[str] = []

    async def first() -> None:
        async with connect("http://kbgate/mcp", TOKEN_ALICE, transport=httpx2.ASGITransport(app=app)) as c:
            found.append(payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["url"])

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(first)
    assert len(found) == 3 and all(url.endswith(TOP) for url in found)
    started = [r for r in caplog.records if r.getMessage() == "StreamableHTTP session manager started"]
    assert len(started) == 1


@pytest.mark.anyio
async def test_a_worker_that_never_started_the_sdk_shuts_down_cleanly(tmp_path: Path, docs_index: Path,
                                                                      redis_url: str) -> None:
    cfg = parse(config(tmp_path, tenants=[], indexes=docs_index, redis_url=redis_url, key_prefix="kbgate-mcp-lazy",
                       agent=mcp_agent_section()), tmp_path)
    app = create_app(cfg)
    async with LifespanManager(app) as m:  # a failed shutdown raises on exit
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate") as c:
            assert (await c.post("/mcp", headers=JSON, content=b"{}")).status_code == 401


def test_a_reload_adds_an_mcp_client_to_workers_that_never_started_the_sdk(tmp_path: Path, docs_index: Path,
                                                                           redis_url: str) -> None:
    port = free_port()
    section = mcp_agent_section()
    no_mcp = {**section, "clients": {"dave": section["clients"]["dave"]}}  # dave: knowledge grants only
    data = config(tmp_path, tenants=[], indexes=docs_index, port=port, workers=2, redis_url=redis_url,
                  key_prefix=f"kbgate-mcp-lazy-{port}", agent=no_mcp)
    cfg = write(tmp_path / "gateway.toml", data)
    with serve(cfg, port=port, workers=2, env=ENV) as srv:
        listed = orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        bearer = {**JSON, "authorization": f"Bearer {TOKEN_ALICE}"}
        assert httpx.post(srv.base + "/mcp", content=listed, headers=bearer, timeout=10).status_code == 401
        write_atomically(cfg, text({**data, "agent": section}), 0o644)  # alice, bob and carol hold MCP grants
        srv.sighup()
        srv.wait_log("config reloaded", 2)  # both workers

        async def first_calls() -> list[str]:
            got = []
            for _ in range(4):  # new connections: either worker may answer each
                async with connect(srv.base + "/mcp", TOKEN_ALICE) as c:
                    got.append(payload(await c.call_tool("search", {"query": "密钥轮换"}))["results"][0]["url"])
            return got

        assert all(url.endswith(TOP) for url in anyio.run(first_calls))
        assert srv.stop() == 0  # the SDK's task group ends with the lifespan, started or not
    assert [r for r in srv.log_records() if r.get("level") in ("error", "critical")] == []
    assert "Traceback" not in srv.logs()
