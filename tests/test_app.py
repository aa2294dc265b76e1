"""gateway/app.py: readiness (/readyz) covers every index the config routes to."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from asgi_lifespan import LifespanManager

from gateway.app import create_app
from gateway.config import parse_config
from gateway.replay import MemoryNonceStore
from indexes.store import IndexStore
from indexes.types import Document, Section


@pytest.fixture(name="anyio_backend")
def _anyio_backend() -> str:
    return "asyncio"


def config(tmp_path: Path, agent_routes: dict[str, dict[str, object]]):  # type: ignore[no-untyped-def]
    IndexStore(tmp_path / "indexes").create_or_open_for_write("docs").ingest(
        [Document("d1", "标题", (Section("", "正文"),))], progress=False)
    return parse_config({
        "indexes": {"dir": str(tmp_path / "indexes")},
        "tenants": {"acme": {"path": "/volcengine/acme", "verify": "report",
                             "routes": [{"first_level_id": "a", "second_level_id": "b", "index": "docs"}]}},
        "agent": {"routes": agent_routes},
    }, base_dir=tmp_path, env={})


async def readyz(tmp_path: Path, agent_routes: dict[str, dict[str, object]]) -> httpx.Response:
    app = create_app(config(tmp_path, agent_routes), nonces=MemoryNonceStore())
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            return await c.get("/readyz")


@pytest.mark.anyio
async def test_readyz_names_an_agent_route_whose_index_is_missing(tmp_path: Path) -> None:
    r = await readyz(tmp_path, {"handbook": {"index": "docs"}, "wiki": {"index": "not-built-yet"}})
    assert r.status_code == 503
    assert r.json() == {"status": "not_ready", "problems": ["agent route wiki: index not-built-yet unavailable"]}


@pytest.mark.anyio
async def test_readyz_ready_when_every_agent_route_has_its_index(tmp_path: Path) -> None:
    r = await readyz(tmp_path, {"handbook": {"index": "docs"}, "later": {"index": "nope", "enabled": False}})
    assert (r.status_code, r.json()["status"]) == (200, "ready")
