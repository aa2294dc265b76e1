"""`try` answers exactly what the caller gets ("try and the real callers must give
byte-identical answer bodies for the same question, scope and index commit").

Rationale: docs/design-notes.md, "tests/e2e/test_try.py".
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson
import pytest

from tests.support.callbacks import post as callback
from tests.support.configs import ADMIN_TOKEN, ENV, TOKEN_ALICE, every_caller, write
from tests.support.console import ENGLISH
from tests.support.harness import Server, free_port, kbgate, serve
from tests.support.mcp_env import connect
from tests.support.polling import until

pytestmark = pytest.mark.anyio

GRANTS = ("knowledge.search", "knowledge.read", "search", "dify.retrieval", "mcp.search", "mcp.fetch")
QUERY = "密钥轮换"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"}
BEARER = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}
AUDIT: dict[int, Path] = {}  # server port → its audit file
CONFIG: dict[int, Path] = {}  # server port → its config file


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("try")
    port = free_port()
    data = every_caller(root, docs_index, port=port, redis_url=redis_url, name="try", grants=GRANTS,
                        admin_token=ADMIN_TOKEN, audit={"sink": "file", "path": str(root / "audit.jsonl")})
    AUDIT[port], CONFIG[port] = root / "audit.jsonl", write(root / "gateway.toml", data)
    with serve(CONFIG[port], port=port, env=ENV) as s:
        yield s


def _try(srv: Server, **fields: Any) -> dict[str, Any]:
    r = httpx.post(srv.base + "/admin/try.json", content=orjson.dumps({"query": QUERY, **fields}), headers=ADMIN,
                   timeout=10)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = orjson.loads(r.content)
    return out


PAIRS = 10  # pairs tried before giving up; each starts at the top of a clock second


async def _same(real: Callable[[], Awaitable[bytes]], tried: Callable[[], bytes]) -> tuple[bytes, bytes]:
    """(real body, try body) of the first pair sent within one clock second. Each pair starts
    just after a second begins, so only a pair slower than a second straddles one; at most PAIRS."""
    for _ in range(PAIRS):
        await anyio.sleep(1.0 - time.time() % 1.0)
        second = int(time.time())
        got, again = await real(), tried()
        if int(time.time()) == second:
            return got, again
    raise AssertionError(f"{PAIRS} pairs each took more than a second: the machine is too slow for this test")


def _post(srv: Server, path: str, body: dict[str, Any]) -> bytes:
    r = httpx.post(srv.base + path, content=orjson.dumps(body), headers=BEARER, timeout=10)
    assert r.status_code == 200, r.text
    return r.content


async def test_try_answers_byte_identical_to_every_wing(srv: Server) -> None:
    sent: list[str] = []

    async def volcengine() -> bytes:
        with httpx.Client(timeout=10, headers=ENGLISH) as c:
            r = callback(c, srv.base, ENV["ACME_SECRET"], query=QUERY, limit=3)
        sent.append(r.headers["x-request-id"])
        return r.content

    def volcengine_try() -> bytes:
        return str(_try(srv, caller="volcengine", tenant="acme", first="tech", second="software", limit=3)
                   ["body"]).encode()

    async def knowledge() -> bytes:
        return _post(srv, "/agent-api/v1/workspaces/support/knowledge/search", {"query": QUERY, "limit": 3})

    def knowledge_try() -> bytes:
        return str(_try(srv, caller="knowledge", client="alice", route="support", limit=3)["body"]).encode()

    async def tools() -> bytes:
        return _post(srv, "/agent-access/v1/tools/search",
                     {"caller": {"type": "agent"}, "input": {"query": QUERY, "limit": 3}, "requestId": "req-e2e-1"})

    def tools_try() -> bytes:
        return str(_try(srv, caller="tools", client="alice", limit=3, request_id="req-e2e-1")["body"]).encode()

    condition = {"logical_operator": "and",
                 "conditions": [{"name": "path", "comparison_operator": "start with", "value": "guide/"}]}

    async def dify() -> bytes:
        return _post(srv, "/dify/retrieval", {"knowledge_id": "support", "query": QUERY,
                                              "metadata_condition": condition,
                                              "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})

    def dify_try() -> bytes:
        return str(_try(srv, caller="dify", client="alice", route="support", limit=3,
                        metadata_condition=condition)["body"]).encode()

    async def mcp() -> bytes:  # on the session opened below: a pair is the tool call and the try alone
        result = await session.call_tool("search", {"query": QUERY})
        text = result.content[0].text  # type: ignore[union-attr]
        return text.encode("utf-8")

    def mcp_try() -> bytes:
        return str(_try(srv, caller="mcp", client="alice")["body"]).encode()

    before = httpx.get(srv.base + "/admin/deliveries.json", headers=ADMIN).json()["deliveries"]
    aud = re.compile(rb'"auditRef":"aud_[0-9a-f]{32}"')
    async with connect(srv.base + "/mcp", TOKEN_ALICE) as session:
        for name, real, tried in (("volcengine", volcengine, volcengine_try), ("knowledge", knowledge, knowledge_try),
                                  ("tools", tools, tools_try), ("dify", dify, dify_try), ("mcp", mcp, mcp_try)):
            got, again = await _same(real, tried)
            if name == "tools":
                assert len(aud.findall(got)) == len(aud.findall(again)) == 1
                got, again = aud.sub(b'"auditRef":"-"', got), aud.sub(b'"auditRef":"-"', again)
            assert got == again, (name, got, again)
            assert b"\xe5\xaf\x86\xe9\x92\xa5" in got  # 密钥: every wing found the page (not an empty answer)
    dify_answer = orjson.loads(dify_try())
    assert {r["metadata"]["path"] for r in dify_answer["records"]} == {"guide/key-rotation.md"}  # the condition applied

    # The real callbacks are deliveries; the tries (the volcengine one included) are not. One
    # more real callback comes last: the one worker's record is written in the order answered,
    # so once it shows, any try recorded would show too.
    await volcengine()

    def recorded() -> list[Any]:
        after = httpx.get(srv.base + "/admin/deliveries.json", headers=ADMIN, timeout=30).json()["deliveries"]
        new = [d["request_id"] for d in after if d not in before]
        return new if sent[-1] in new else []

    assert sorted(until(recorded, within=30, what="the last callback is recorded")) == sorted(sent)


def test_a_try_explains_and_is_audited_as_the_admins(srv: Server) -> None:
    out = _try(srv, caller="dify", client="alice", route="support", limit=1)
    [search] = out["searches"]
    # No real caller asked this question with this limit: the answer cache does not hold it.
    assert search["index"] == "docs" and search["limit"] == 1 and search["cache"] == "miss"
    [kept] = search["kept"]
    assert kept["doc_id"] == "guide/key-rotation.md" and {"密钥", "轮换"} <= set(kept["terms"])
    scores = kept["scores"]  # a lexical index without a reranker: BM25 alone
    assert scores["bm25"] > 0 and (scores["dense"], scores["fused"], scores["rerank"]) == (None, None, None), scores
    reasons = {d["reason"] for d in search["dropped"]}
    assert "limit" in reasons and "outside_scope" in reasons  # ops/deploy.md ranked 2nd; config/** is never served
    assert {"index", "floor_and_scope", "request_and_shaping"} <= set(out["stages_ms"])
    audit = AUDIT[srv.port].read_text("utf-8")
    lines = [orjson.loads(line) for line in audit.splitlines()]
    mine = [line for line in lines if line["tool"] == "admin.try" and line["request_id"] == out["request_id"]]
    assert len(mine) == 1 and mine[0]["wing"] == "admin" and mine[0]["caller"] == "dify"
    assert QUERY not in audit


def test_try_refuses_what_the_config_has_not_and_needs_the_admin_token(srv: Server) -> None:
    r = httpx.post(srv.base + "/admin/try.json", content=b'{"caller":"volcengine","query":"x","tenant":"acme",'
                   b'"first":"tech","second":"nope"}', headers=ADMIN)
    assert r.status_code == 400 and r.json()["field"] == "first/second"
    r = httpx.post(srv.base + "/admin/try.json", content=b'{"caller":"volcengine","query":"x","bogus":1}',
                   headers=ADMIN)
    assert r.status_code == 400 and r.json()["field"] == "bogus"
    r = httpx.post(srv.base + "/admin/try.json", content=b"[", headers=ADMIN)
    assert r.status_code == 400
    r = httpx.post(srv.base + "/admin/try.json", content=b'{"caller":"mcp","query":"x"}',
                   headers={"content-type": "application/json"})
    assert r.status_code == 401
    r = httpx.post(srv.base + "/admin/try.json", content=b'{"caller":"mcp","query":"x","client":"alice"}',
                   headers={**ADMIN, "origin": "https://evil.example"})
    assert r.status_code == 403


def test_kbgate_try_prints_the_callers_body_and_compares_a_successor(srv: Server) -> None:
    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        real = callback(c, srv.base, ENV["ACME_SECRET"], query=QUERY, limit=2).content
    argv = ("try", "--config", str(CONFIG[srv.port]), "--caller", "volcengine", "--tenant", "acme", "--first",
            "tech", "--second", "software", "--query", QUERY, "--limit", "2")
    r = kbgate(*argv, "--json", env=ENV)
    assert r.returncode == 0, r.stderr
    out = orjson.loads(r.stdout)
    assert out["body"].encode() == real
    assert [h["doc_id"] for h in out["searches"][0]["kept"]] == [x["Id"].split("#")[0] for x in
                                                                  orjson.loads(real)["Result"]]
    side = kbgate(*argv, "--successor", "kb", env=ENV)
    assert side.returncode == 0, side.stderr
    text = side.stdout
    assert "volcengine acme tech/software: HTTP 200" in text and "volcengine acme tech/software -> kb: HTTP" in text
    assert "search docs at commit" in text and "search kb at commit" in text
    assert f"{out['searches'][0]['kept'][0]['score']:.4f}" in text  # the numbers printed are the try's
    bad = kbgate("try", "--config", str(CONFIG[srv.port]), "--caller", "dify", "--client", "alice", "--query", "x",
                 env=ENV)
    assert bad.returncode == 2 and "route: is required" in bad.stderr
