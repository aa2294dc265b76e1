"""The example requests of the docs, sent as written to a real `kbgate serve` (a free port, a
real Redis, a real index): docs/agent-developers.md's tool API request and
docs/document-api.md's GET of a revision are answered, and the answers have the shape the docs
show, envelope included."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.configs import ENV, client, config, write
from tests.support.harness import Server, free_port, serve
from tests.support.paths import ROOT

TOKEN = "docs-example-token-0123456789abcdef"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def section(doc: str, heading: str) -> str:
    """The text of `doc` under the heading `heading`, up to the next heading of any level."""
    text = (ROOT / "docs" / doc).read_text("utf-8")
    m = re.search(rf"^#+ {re.escape(heading)}\n(.*?)(?=^#+ |\Z)", text, re.M | re.S)
    assert m, f"no heading {heading!r} in docs/{doc}"
    return m[1]


def blocks(text: str) -> list[tuple[str, str]]:
    """The fenced blocks of `text`: (language, body)."""
    return [(m[1], m[2]) for m in FENCE.finditer(text)]


def request_of(block: str) -> tuple[str, str, dict[str, str], bytes | None]:
    """An HTTP request as the docs write one: 'METHOD PATH', header lines, a blank line, the body."""
    head, _, body = block.partition("\n\n")
    first, *lines = head.splitlines()
    method, path = first.split()[:2]
    headers = dict(line.split(": ", 1) for line in lines)
    return method, path, headers, body.strip().encode() or None


def shape(value: Any) -> Any:
    """The keys of `value`, recursively (lists by their first item): what an example shows."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


@pytest.fixture(name="server", scope="module")
def _server(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("doc-examples")
    IndexStore(root / "indexes").create_or_open_for_write("docs").ingest(
        [Document("keys", "密钥轮换", (Section("轮换", "如何轮换密钥：先添加新密钥，再停用旧密钥。"),),
                  path="guide/keys.md")], progress=False)
    port = free_port()
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"docs": {"index": "docs"}},
             "clients": {"pipeline": client("p1", TOKEN, ["docs"], ["search", "ask", "documents.write"],
                                            write_indexes=["docs"], datasets=["*"], path_globs=["**"])}}
    cfg = write(root / "gateway.toml", config(root, tenants=[], indexes=root / "indexes", port=port, workers=1,
                                              redis_url=redis_url, key_prefix=f"kbgate-docex-{port}", agent=agent,
                                              audit={"sink": "off"}))
    with serve(cfg, port=port, env=ENV) as srv:
        yield srv


def send(server: Server, method: str, path: str, headers: dict[str, str], body: bytes | None) -> httpx.Response:
    headers = {k: v.replace("<token>", TOKEN) for k, v in headers.items()}
    return httpx.request(method, server.url + path, headers=headers, content=body, timeout=30)


def test_agent_developers_example_request_is_answered_as_shown(server: Server) -> None:
    [(_, req), (_, answer)] = blocks(section("agent-developers.md", "An example request"))[:2]
    r = send(server, *request_of(req))
    print(r.status_code, r.text)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "passed"
    assert shape(r.json()) == shape(orjson.loads(answer))


def test_document_api_get_example_is_answered_as_shown(server: Server) -> None:
    put = httpx.put(server.url + "/documents/v1/indexes/docs/documents/faq-7", timeout=30,
                    headers={"authorization": f"Bearer {TOKEN}", "content-type": "application/json"},
                    content=orjson.dumps({"title": "退款政策", "content": "购买后七天内可以无理由退款。"}))
    assert put.status_code == 200, put.text
    [(_, example)] = blocks(section("document-api.md", "Reading a revision back"))[:1]
    first, _, answer = example.partition("\n")
    method, path = first.split()
    r = httpx.request(method, server.url + path, headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
    print(r.status_code, r.text)
    assert r.status_code == 200, r.text
    assert shape(r.json()) == shape(orjson.loads(answer))
