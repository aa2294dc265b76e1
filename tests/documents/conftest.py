"""The document API's test setting: a private copy of the test indexes ('kb': tenant acme's
route tech/software and agent route 'support'), four clients, the app in-process
(`docs_app`) with audit lines in a file, and the checks every answer passes.

Rationale: docs/design-notes.md, "tests/documents/conftest.py".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import orjson
import pytest

from gateway.documents.schemas import load
from gateway.serve.app import Gateway
from tests.support.configs import REF_KEY, SECRETS, client, config, parse, tenant

WRITER = "docs-writer-token-0123456789abcd"
NARROW = "docs-narrow-token-0123456789abcd"
READER = "docs-reader-token-0123456789abcd"
OTHER = "docs-other-token-01234567890abcd"
TOKENS = (WRITER, NARROW, READER, OTHER)
EVERYTHING = {"datasets": ["*"], "path_globs": ["**"]}
LONG = "l" * 70  # a write_indexes name the config takes (up to 128) but no index may have (the store's 64)
BASE = "/documents/v1/indexes"


def documents_config(root: Path, indexes: Path, *, documents: dict[str, Any] | None = None,
                     max_document_bytes: int | None = None, **over: Any) -> dict[str, Any]:
    """The config as a dict (module doc); documents: the [documents] table; max_document_bytes:
    indexes.max_document_bytes; over: more tables (config's keywords)."""
    agent = {
        "ref_key_env": "KBGATE_REF_KEY",
        "routes": {"support": {"index": "kb"}, "fresh": {"index": "fresh"}},
        "clients": {
            "writer": client("w1", WRITER, ["support", "fresh"], ["documents.write", "search"],
                             write_indexes=["kb", "fresh", LONG], **EVERYTHING),
            "narrow": client("n1", NARROW, ["support"], ["documents.write"], write_indexes=["kb"],
                             datasets=["public"], path_globs=["**"]),
            "reader": client("r1", READER, ["support"], ["search"], **EVERYTHING),
            "other": client("o1", OTHER, ["support"], ["documents.write"], write_indexes=["other"], **EVERYTHING),
        },
    }
    acme = tenant("acme", keys=[("acme-2026-11", "env:ACME_SECRET")], routes=[("tech", "software", "kb")])
    data = config(root, tenants=[acme], indexes=indexes, agent=agent,
                  audit={"sink": "file", "path": str(root / "audit.jsonl")}, **over)
    if documents:
        data["documents"] = documents
    if max_document_bytes is not None:
        data["indexes"]["max_document_bytes"] = max_document_bytes
    return data


def result(r: httpx.Response, status: int = 200) -> dict[str, Any]:
    """Every answer: its status, no-store, JSON valid against documents.result, no secret."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["cache-control"] == "no-store", r.headers
    assert r.headers["content-type"].startswith("application/json")
    body: dict[str, Any] = orjson.loads(r.content)
    jsonschema.validate(body, load("documents.result"), cls=jsonschema.Draft202012Validator)
    for leak in (*TOKENS, *SECRETS, REF_KEY, "Traceback", "/tmp/"):
        assert leak not in r.text, leak
    assert body["status"] == ("passed" if status == 200 else "denied" if status in (401, 403) else "failed")
    return body


def refused(r: httpx.Response, status: int, code: str) -> list[dict[str, Any]]:
    """A refusal: its status, its code first, no data; returns the error objects."""
    body = result(r, status)
    assert body["data"] is None and body["errors"][0]["code"] == code, body
    errors: list[dict[str, Any]] = body["errors"]
    return errors


@dataclass
class DocsApp:
    """The app in-process: its http client (ASGI), the app, and the folders."""

    http: httpx.AsyncClient
    app: Gateway
    root: Path
    indexes: Path

    async def put(self, index: str, doc_id: str, doc: Any = None, *, token: str = WRITER, content: bytes | None = None,
                  content_type: str = "application/json", **params: str) -> httpx.Response:
        body = orjson.dumps(doc) if content is None else content
        return await self.http.put(f"{BASE}/{index}/documents/{doc_id}", content=body, params=params or None,
                                   headers={"authorization": f"Bearer {token}", "content-type": content_type})

    async def delete(self, index: str, doc_id: str, *, token: str = WRITER) -> httpx.Response:
        return await self.http.delete(f"{BASE}/{index}/documents/{doc_id}",
                                      headers={"authorization": f"Bearer {token}"})

    async def get(self, index: str, doc_id: str, *, token: str = WRITER) -> httpx.Response:
        return await self.http.get(f"{BASE}/{index}/documents/{doc_id}", headers={"authorization": f"Bearer {token}"})

    async def batch(self, index: str, body: Any, *, token: str = WRITER) -> httpx.Response:
        return await self.http.post(f"{BASE}/{index}/batch", content=orjson.dumps(body),
                                    headers={"authorization": f"Bearer {token}", "content-type": "application/json"})

    async def search(self, query: str) -> list[str]:
        """Ids the tool API's search finds for `query` (client WRITER, route support)."""
        r = await self.http.post("/agent-access/v1/tools/search", content=orjson.dumps(
            {"caller": {"type": "agent"}, "input": {"query": query, "limit": 10}}),
            headers={"authorization": f"Bearer {WRITER}", "content-type": "application/json"})
        assert r.status_code == 200, r.text
        return [x["id"].removeprefix("support:").split("#")[0] for x in orjson.loads(r.content)["data"]["results"]]

    def audit(self) -> list[dict[str, Any]]:
        p = self.root / "audit.jsonl"
        return [orjson.loads(line) for line in p.read_bytes().splitlines()] if p.exists() else []


@pytest.fixture(name="docs_app")
async def _docs_app(private_index: Path, start_app: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[DocsApp]]:
    """docs_app(**over) → a started app over a private copy of the test indexes; over: as
    `documents_config`'s."""
    root = private_index.parent

    async def start(**over: Any) -> DocsApp:
        cfg = parse(documents_config(root, private_index, **over), root)
        http, app, _ = await start_app(cfg)
        return DocsApp(http, app, root, private_index)

    return start
