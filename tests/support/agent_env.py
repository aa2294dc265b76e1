"""The agent endpoints' test setting: the one test index, a config with three agent clients
(tests.support.configs.agent_section), the app under asgi-lifespan with an injected clock
and a real Redis, and schema validation of every response. Registered as a pytest plugin by
tests/conftest.py, so its fixtures (root, env) serve every test folder.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson
import pytest

from gateway.agent.schemas import load
from gateway.core.clock import FixedClock
from gateway.core.config import Config
from gateway.core.runtime import Runtime
from gateway.serve.app import Gateway
from indexes.store import IndexStore
from indexes.types import Document
from tests.support.configs import (
    ACME,
    ENV,
    NOW,
    REF_KEY,
    SECRET_ACME,
    TOKEN_ALICE,
    TOKEN_BOB,
    TOKEN_CAROL,
    agent_section,
    config,
    parse,
)
from tests.support.documents import DOCS, LONG_TEXT, SECRET_TEXT

WEBHOOK_SECRET = SECRET_ACME
RUN_ID = "0b5e7c1a-2f4d-4e6b-9a8c-1d2e3f405162"
BASE = "/agent-api/v1/workspaces"

__all__ = ["BASE", "DOCS", "ENV", "LONG_TEXT", "NOW", "REF_KEY", "RUN_ID", "SECRET_TEXT", "TOKEN_ALICE", "TOKEN_BOB",
           "TOKEN_CAROL", "WEBHOOK_SECRET", "Env", "EnvFactory", "access_validator", "agent_section", "check",
           "make_config", "ok", "rejected"]


def make_config(root: Path, redis_url: str, key_prefix: str, *, agent: dict[str, Any] | None = None) -> Config:
    """Tenant acme, the agent section (or `agent`), audit lines in root/audit.jsonl."""
    data = config(root, tenants=[ACME], indexes=root / "indexes", redis_url=redis_url, key_prefix=key_prefix,
                  agent=agent if agent is not None else agent_section(),
                  audit={"sink": "file", "path": str(root / "audit.jsonl")})
    return parse(data, root)


@pytest.fixture(name="root")
def _root(private_index: Path) -> Path:
    """A folder with a private copy of the test index (root/indexes), so tests may update,
    delete and hide documents."""
    return private_index.parent


@dataclass
class Env:
    """One running app: its runtime (config may be swapped as a reload does), clock, client."""

    app: Gateway
    clock: FixedClock
    http: httpx.AsyncClient
    root: Path

    @property
    def rt(self) -> Runtime:
        return self.app.runtime

    def audit_lines(self) -> list[dict[str, Any]]:
        p = self.root / "audit.jsonl"
        return [orjson.loads(line) for line in p.read_bytes().splitlines()] if p.exists() else []

    def reingest(self, docs: list[Document], *, delete_missing: bool = False) -> None:
        """Write to the index as the indexer does, then let the server's reader see it."""
        IndexStore(self.root / "indexes").create_or_open_for_write("docs").ingest(
            docs, delete_missing=delete_missing, progress=False)
        self.rt.indexes.open("docs").maybe_reload(force=True)

    async def get(self, route: str, token: str | None = TOKEN_ALICE, **headers: str) -> httpx.Response:
        return await self.http.get(f"{BASE}/{route}/knowledge/capabilities", headers=_auth(token, headers))

    async def post(self, route: str, op: str, body: Any, token: str | None = TOKEN_ALICE,
                   **headers: str) -> httpx.Response:
        content = body if isinstance(body, bytes) else orjson.dumps(body)
        return await self.http.post(f"{BASE}/{route}/knowledge/{op}", content=content,
                                    headers={"content-type": "application/json", **_auth(token, headers)})

    async def search(self, query: str = "密钥轮换", route: str = "support", **kw: Any) -> httpx.Response:
        token = kw.pop("token", TOKEN_ALICE)
        headers = kw.pop("headers", {})
        return await self.post(route, "search", {"query": query, **kw}, token, **headers)

    async def read(self, ref: str, route: str = "support", **kw: Any) -> httpx.Response:
        token = kw.pop("token", TOKEN_ALICE)
        headers = kw.pop("headers", {})
        return await self.post(route, "read", {"ref": ref, **kw}, token, **headers)

    async def first_ref(self, query: str = "密钥轮换", **kw: Any) -> tuple[str, dict[str, Any]]:
        r = await self.search(query, **kw)
        body = ok(r, "bailing.agent-knowledge-search.v1")
        assert body["hints"], body
        return body["hints"][0]["ref"], body


def _auth(token: str | None, headers: dict[str, str]) -> dict[str, str]:
    h = {k.replace("_", "-"): v for k, v in headers.items()}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    return h


EnvFactory = Callable[..., Any]


@pytest.fixture(name="env")
def _env(root: Path, start_app: EnvFactory, redis_url: str, key_prefix: str) -> EnvFactory:
    """env(agent=...) → Env: the app over a private copy of the test index (see make_config)."""

    async def factory(**kw: Any) -> Env:
        http, app, clock = await start_app(make_config(root, redis_url, key_prefix, **kw))
        return Env(app, clock, http, root)

    return factory


def check(r: httpx.Response, schema: str) -> dict[str, Any]:
    """Every response: no-store, JSON, valid against its schema; returns the body."""
    assert r.headers["cache-control"] == "no-store", r.headers
    assert r.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = orjson.loads(r.content)
    jsonschema.validate(body, load(schema), cls=jsonschema.Draft202012Validator)
    return body


def ok(r: httpx.Response, schema: str) -> dict[str, Any]:
    assert r.status_code == 200, (r.status_code, r.text)
    return check(r, schema)


def rejected(r: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An error answer: status, code, error schema, and nothing internal in it."""
    assert r.status_code == status, (r.status_code, r.text)
    body = check(r, "bailing.agent-knowledge-error.v1")
    assert body["error"]["code"] == code, body
    text = r.text
    for leak in (REF_KEY, WEBHOOK_SECRET, TOKEN_ALICE, TOKEN_BOB, TOKEN_CAROL, SECRET_TEXT, "/tmp", "Traceback"):
        assert leak not in text, leak
    return body


# Agent Access tool API contracts (gateway/agent/schemas/*.json, Agent Access API 技术设计): the files refer to
# each other by $id, so validators need a registry holding all of them.
ACCESS_SCHEMAS = (
    "AgentToolRequest", "AgentToolResult", "ErrorObject", "EffectiveScope", "Citation",
    "SearchResult", "Answer", "Page", "ContextPack", "FeedbackRequest",
    "ImprovementTaskRequest", "WriteResult", "ToolInputs",
)


def access_validator(name: str) -> jsonschema.Draft202012Validator:
    """A Draft 2020-12 validator for the access contract `name`, with every $ref resolvable."""
    from referencing import Registry, Resource

    registry = Registry().with_resources(
        (load(n)["$id"], Resource.from_contents(load(n))) for n in ACCESS_SCHEMAS)
    return jsonschema.Draft202012Validator(load(name), registry=registry,
                                           format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


@dataclass
class AppEnv:
    """An app under test with its ASGI client, as the Bearer wings are called: `post` a JSON
    body with the client's token, `tool` a tool API call as caller `caller_id`."""

    app: Gateway
    http: httpx.AsyncClient
    cfg: Config
    token: str
    caller_id: str

    async def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return await self.http.post(path, content=orjson.dumps(body), headers={
            "content-type": "application/json", "authorization": f"Bearer {self.token}"})

    async def tool(self, name: str, data: dict[str, Any]) -> httpx.Response:
        return await self.post(f"/agent-access/v1/tools/{name}",
                               {"caller": {"type": "agent", "id": self.caller_id}, "input": data})
