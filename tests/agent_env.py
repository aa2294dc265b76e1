"""Shared setting for the agent tests: a real Tantivy index, a config with three agent
clients, the app under asgi-lifespan with an injected clock and a real Redis, and schema
validation of every response. Imported by test_agent_knowledge, test_audit, test_scope.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson
import pytest
from asgi_lifespan import LifespanManager

from gateway.agent.principals import token_hash
from gateway.agent.schemas import load
from gateway.core.clock import FixedClock
from gateway.core.config import Config, parse_config
from gateway.core.replay import RedisNonceStore
from gateway.serve.app import Gateway, Runtime, create_app
from indexes.store import IndexStore
from indexes.types import Document, Section

NOW = 1_800_000_000
REF_KEY = "ref-master-key-0123456789-abcdefghijklmnop"
WEBHOOK_SECRET = "webhook-secret-0123456789-abcdefghijklmn"
TOKEN_ALICE = "alice-token-AAAAAAAAAAAAAAAAAAAA"
TOKEN_BOB = "bob-token-BBBBBBBBBBBBBBBBBBBBBBBB"
TOKEN_CAROL = "carol-token-CCCCCCCCCCCCCCCCCCCC"
ENV = {"KBGATE_REF_KEY": REF_KEY, "ACME_KEY": WEBHOOK_SECRET}
RUN_ID = "0b5e7c1a-2f4d-4e6b-9a8c-1d2e3f405162"
BASE = "/agent-api/v1/workspaces"

# 𠀋 is 4 bytes in UTF-8, 汉字 3, digits 1: page cuts must respect every width.
LONG_TEXT = "\n".join(
    f"第{i}节：运维手册说明密钥轮换与索引重建的步骤𠀋，先备份再执行，最后核对结果。" for i in range(3000)
)
SECRET_TEXT = "配置里的密钥轮换口令绝不可外泄"


def _doc(doc_id: str, title: str, text: str, **kw: Any) -> Document:
    return Document(doc_id, title, (Section("", text),), path=kw.pop("path", doc_id), **kw)


DOCS = [
    _doc("guide/key-rotation.md", "密钥轮换", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。", dataset="public"),
    _doc("guide/replay.md", "重放攻击防护", "每个随机串在时间窗口内只能使用一次，重复投递会被拒绝。",
         dataset="internal"),
    _doc("ops/deploy.md", "部署与密钥", "部署时把密钥放进环境变量，轮换时滚动重启。", dataset="public"),
    _doc("config/secrets.md", "密钥轮换配置", SECRET_TEXT, dataset="public"),
    _doc("state/manifest.md", "密钥轮换状态", "状态文件记录密钥轮换的进度。", dataset="public"),
    _doc("working/draft.md", "密钥轮换草稿", "草稿：密钥轮换的新流程，尚未发布。", dataset="public"),
    _doc("guide/hidden.md", "密钥轮换内部", "隐藏文档：密钥轮换的内部细节。", dataset="public", qa_visible=False),
    _doc("long/manual.md", "运维手册", LONG_TEXT, dataset="public"),
    *[
        _doc(f"wide/budget-{n}.md", f"预算说明{n}" + "很长的标题" * 39, "预算超出时丢弃提示而不是截断。" * 20,
             dataset="public")
        for n in range(3)
    ],
]


def agent_section(**over: Any) -> dict[str, Any]:
    everything = {"datasets": ["*"], "path_globs": ["**"], "tools": ["knowledge.search", "knowledge.read"]}
    section: dict[str, Any] = {
        "ref_key_env": "KBGATE_REF_KEY",
        "routes": {
            "support": {"index": "docs"},
            "ops": {"index": "docs", "path_globs": ["ops/**"]},
            "off": {"index": "docs", "enabled": False},
            "gone": {"index": "absent"},
            "strict": {"index": "docs", "min_score": 1e5},
        },
        "clients": {
            "alice": {"tokens": [{"id": "t1", "sha256": token_hash(TOKEN_ALICE)}],
                      "routes": ["support", "ops", "off", "gone", "strict"], **everything},
            "bob": {"tokens": [{"id": "t1", "sha256": token_hash(TOKEN_BOB)}], "routes": ["support"], **everything},
            "carol": {"tokens": [{"id": "c1", "sha256": token_hash(TOKEN_CAROL)}], "routes": ["support"],
                      "tools": ["knowledge.search"], "datasets": ["public"], "path_globs": ["guide/**"]},
        },
    }
    section.update(over)
    return section


def make_config(root: Path, redis_url: str, key_prefix: str, *, agent: dict[str, Any] | None = None) -> Config:
    data = {
        "replay": {"redis_url": redis_url, "key_prefix": key_prefix},
        "indexes": {"dir": str(root / "indexes")},
        "tenants": {"acme": {"path": "/volcengine/acme", "secrets": [{"id": "k1", "value_env": "ACME_KEY"}],
                             "routes": [{"first_level_id": "tech", "second_level_id": "software",
                                         "index": "docs"}]}},
        "agent": agent if agent is not None else agent_section(),
        "audit": {"sink": "file", "path": str(root / "audit.jsonl")},
    }
    return parse_config(data, base_dir=root, env=ENV)


@pytest.fixture(name="index_root", scope="module")
def _index_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("agent-idx")
    IndexStore(root / "indexes").create_or_open_for_write("docs").ingest(DOCS, progress=False)
    return root


@pytest.fixture(name="root")
def _root(index_root: Path, tmp_path: Path) -> Path:
    """A private copy of the index per test, so tests may update, delete and hide documents."""
    shutil.copytree(index_root / "indexes", tmp_path / "indexes")
    return tmp_path


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


@pytest.fixture(name="anyio_backend")
def _anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(name="env")
async def _env(root: Path, redis_url: str, key_prefix: str) -> AsyncIterator[EnvFactory]:
    managers: list[LifespanManager] = []

    async def factory(**kw: Any) -> Env:
        cfg = make_config(root, redis_url, key_prefix, **kw)
        clock = FixedClock(float(NOW))
        app = create_app(cfg, clock=clock, nonces=RedisNonceStore(redis_url, 1.0, clock))
        manager = LifespanManager(app)  # type: ignore[arg-type]
        await manager.__aenter__()
        managers.append(manager)
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=manager.app), base_url="http://kbgate")
        return Env(app, clock, http, root)

    yield factory
    for m in managers:
        await m.__aexit__(None, None, None)


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
