"""The Dify wing's test setting: a 'handbook' index whose documents carry metadata, agent
routes over it, three API keys (clients) and the [dify] section; the app in-process
(`dify_app`) or a real `kbgate serve` on a free port (`dify_server`).

Rationale: docs/design-notes.md, "tests/dify/conftest.py".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson
import pytest

from gateway.dify.schemas import load
from gateway.serve.app import Gateway
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.configs import ENV, REF_KEY, client, config, parse, write
from tests.support.harness import Server, serve

DIFY_KEY = "dify-app-key-7Hq2Lm9Xc4Vb1Nz8"
NARROW_KEY = "dify-narrow-key-Pq4Rs6Tu8Vw0Xy2"
NOGRANT_KEY = "dify-nogrant-key-Ab3Cd5Ef7Gh9Ij1"
KEYS = (DIFY_KEY, NARROW_KEY, NOGRANT_KEY)
HIDDEN_TEXT = "内部口令绝不可外泄"
GRANT = "dify.retrieval"


def _doc(doc_id: str, title: str, text: str, **kw: Any) -> Document:
    meta = tuple(sorted(kw.pop("meta", {}).items()))
    return Document(doc_id, title, (Section("", text),), path=doc_id, metadata=meta, **kw)


HANDBOOK = [
    _doc("guide/key-rotation.md", "密钥轮换", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。", dataset="public",
         url="https://kb.example.com/guide/key-rotation", publish_time=1_714_521_600,
         meta={"author": "张三", "tags": ("运维", "密钥"), "version": 3, "released": "2024-05-01"}),
    _doc("guide/replay.md", "重放攻击防护", "每个随机串在时间窗口内只能使用一次，重复投递的密钥请求会被拒绝。",
         dataset="internal", publish_time=1_700_438_400,
         meta={"author": "李四", "tags": ("安全",), "version": 5.5, "released": "2023-11-20"}),
    _doc("ops/deploy.md", "部署与密钥", "部署时把密钥放进环境变量，轮换时滚动重启。", dataset="public",
         meta={"author": "王五", "level": "高"}),
    _doc("ops/backup.md", "密钥备份", "密钥备份存放在离线介质上，每季度核对一次。", dataset="public"),
    _doc("config/secrets.md", "密钥轮换配置", HIDDEN_TEXT + "，密钥轮换", dataset="public"),
    _doc("working/draft.md", "密钥轮换草稿", "草稿：密钥轮换的新流程。", dataset="public"),
    _doc("guide/hidden.md", "密钥轮换内部", "隐藏文档：密钥轮换的细节。" + HIDDEN_TEXT, dataset="public",
         qa_visible=False),
]
VISIBLE = {"guide/key-rotation.md", "guide/replay.md", "ops/deploy.md", "ops/backup.md"}


@pytest.fixture(name="handbook_indexes", scope="session")
def _handbook_indexes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """indexes.dir holding the 'handbook' index, built once (read-only for the tests)."""
    root = tmp_path_factory.mktemp("dify-indexes")
    IndexStore(root).create_or_open_for_write("handbook").ingest(HANDBOOK, progress=False)
    return root


def dify_config(root: Path, indexes: Path, *, redis_url: str, key_prefix: str, port: int | None = None,
                workers: int | None = None, dify: dict[str, Any] | None = None, gone: bool = True) -> dict[str, Any]:
    """The config (as a dict): routes handbook, ops-only (ops/**), off (disabled), gone (absent
    index; not with `gone=False`, since /readyz then fails); clients app, narrow, nogrant;
    [dify] max_top_k 5, default_top_k 3; audit in a file."""
    routes: dict[str, Any] = {"handbook": {"index": "handbook"}, "ops-only": {"index": "handbook",
                                                                             "path_globs": ["ops/**"]},
                              "off": {"index": "handbook", "enabled": False}}
    if gone:
        routes["gone"] = {"index": "absent"}
    agent = {
        "ref_key_env": "KBGATE_REF_KEY",
        "routes": routes,
        "clients": {
            "app": client("d1", DIFY_KEY, list(routes), [GRANT], datasets=["*"], path_globs=["**"]),
            "narrow": client("n1", NARROW_KEY, ["handbook"], [GRANT], datasets=["public"], path_globs=["guide/**"]),
            "nogrant": client("g1", NOGRANT_KEY, ["handbook"], ["knowledge.search"], datasets=["*"],
                              path_globs=["**"]),
        },
    }
    return config(root, tenants=[], indexes=indexes, port=port, workers=workers, redis_url=redis_url,
                  key_prefix=key_prefix, agent=agent, audit={"sink": "file", "path": str(root / "audit.jsonl")},
                  dify={"max_top_k": 5, "default_top_k": 3, **(dify or {})})


def audit_lines(root: Path) -> list[dict[str, Any]]:
    p = root / "audit.jsonl"
    return [orjson.loads(line) for line in p.read_bytes().splitlines()] if p.exists() else []


def check(r: httpx.Response, schema: str) -> dict[str, Any]:
    """Every answer: no-store, JSON, valid against its schema, no secret or hidden text."""
    assert r.headers["cache-control"] == "no-store", r.headers
    assert r.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = orjson.loads(r.content)
    jsonschema.validate(body, load(schema), cls=jsonschema.Draft202012Validator)
    for leak in (*KEYS, REF_KEY, HIDDEN_TEXT, "Traceback"):
        assert leak not in r.text, leak
    return body


def records(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, (r.status_code, r.text)
    out: list[dict[str, Any]] = check(r, "dify.retrieval-response")["records"]
    return out


def error(r: httpx.Response, status: int, error_code: int) -> str:
    """A Dify error answer: its status and code; returns error_msg."""
    assert r.status_code == status, (r.status_code, r.text)
    body = check(r, "dify.error")
    assert body["error_code"] == error_code, body
    msg: str = body["error_msg"]
    return msg


def request_body(knowledge_id: str = "handbook", query: str = "密钥轮换", *, valid: bool = True,
                 **over: Any) -> dict[str, Any]:
    """A retrieval request as Dify sends it (with `over` replacing fields), validated against the
    request schema unless `valid` is False (a malformed request on purpose)."""
    body: dict[str, Any] = {"retrieval_setting": {"top_k": 5, "score_threshold": 0.0}, "query": query,
                            "knowledge_id": knowledge_id, "metadata_condition": None, **over}
    if valid:
        jsonschema.validate(body, load("dify.retrieval-request"), cls=jsonschema.Draft202012Validator)
    return body


@dataclass
class DifyApp:
    """The app in-process: its http client (ASGI), the app and the folder of its audit file."""

    http: httpx.AsyncClient
    app: Gateway
    root: Path

    async def post(self, body: Any = None, key: str | None = DIFY_KEY, *, raw: bytes | None = None,
                   headers: dict[str, str] | None = None, path: str = "/dify/retrieval") -> httpx.Response:
        h = {"content-type": "application/json", **(headers or {})}
        if key is not None:
            h["authorization"] = f"Bearer {key}"
        content = raw if raw is not None else orjson.dumps(body if body is not None else request_body())
        return await self.http.post(path, content=content, headers=h)

    def audit(self) -> list[dict[str, Any]]:
        return audit_lines(self.root)


AppFactory = Callable[..., Awaitable[DifyApp]]


@pytest.fixture(name="dify_app")
def _dify_app(tmp_path: Path, handbook_indexes: Path, start_app: Callable[..., Awaitable[Any]], redis_url: str,
              key_prefix: str) -> AppFactory:
    """dify_app(dify={...}) → DifyApp over the handbook index."""

    async def factory(dify: dict[str, Any] | None = None) -> DifyApp:
        cfg = parse(dify_config(tmp_path, handbook_indexes, redis_url=redis_url, key_prefix=key_prefix, dify=dify),
                    tmp_path)
        http, app, _ = await start_app(cfg)
        return DifyApp(http, app, tmp_path)

    return factory


@pytest.fixture(name="dify_server", scope="module")
def _dify_server(tmp_path_factory: pytest.TempPathFactory, handbook_indexes: Path, redis_url: str) -> Iterator[Server]:
    """A real `kbgate serve` (2 workers, Redis) of the Dify config on a free port."""
    root = tmp_path_factory.mktemp("dify-server")
    data = dify_config(root, handbook_indexes, redis_url=redis_url, key_prefix=f"kbgate-dify-{root.name}",
                       workers=2, gone=False)
    srv = serve(write(root / "gateway.toml", data), workers=2, env=ENV)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()
