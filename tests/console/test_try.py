"""gateway.console.try_ in-process: what a try explains, and that it leaves no trace but its own.

A Runtime over the test indexes (tests.support.documents), the real answer cache, and agent
routes with and without a floor; no server (tests/e2e/test_try.py proves the bodies equal
the real callers' through a real one).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.console import try_
from gateway.core.audit import AuditEvent
from gateway.core.errors import TryInvalid
from gateway.core.events import AnswerLooked, Delivery
from gateway.core.runtime import Runtime
from tests.support.configs import ACME_KEYS, EVERYTHING, TOKEN_ALICE, client, config, parse, tenant

pytestmark = pytest.mark.anyio
GRANTS = ("knowledge.search", "search", "dify.retrieval", "mcp.search")
QUERY = "密钥轮换"


@pytest.fixture(name="rt")
async def _rt(docs_index: Path, tmp_path: Path) -> AsyncIterator[Runtime]:
    agent = {"ref_key_env": "KBGATE_REF_KEY",
             "routes": {"support": {"index": "docs", "relevance_floor": 0.0},
                        "strict": {"index": "docs", "relevance_floor": 0.6},
                        "again": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support", "strict", "again"], GRANTS, **EVERYTHING)}}
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, agent=agent, audit={"sink": "file", "path": str(tmp_path / "audit.jsonl")})
    rt = Runtime(parse(data, tmp_path))
    try:
        yield rt
    finally:
        await rt.close()


def _only(out: dict[str, Any]) -> dict[str, Any]:
    [search] = out["searches"]
    return search


async def test_the_routes_floor_drops_a_hit_and_says_so(rt: Runtime) -> None:
    # the key-rotation page holds every word (relevance ~0.68 in this small index); ops/deploy.md lacks the
    # rare 退役 (~0.51); a small index's relevances are pulled toward the middle by the domain weight's prior
    query = "密钥轮换 退役"
    open_route = _only(try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", query, 3, client="alice",
                                                                        route="support"))))
    strict = _only(try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", query, 3, client="alice",
                                                                    route="strict"))))
    relevance = {h["doc_id"]: h["relevance"] for h in open_route["kept"]}
    assert list(relevance)[:2] == ["guide/key-rotation.md", "ops/deploy.md"], relevance
    assert relevance["guide/key-rotation.md"] >= 0.6 > relevance["ops/deploy.md"], relevance
    assert strict["floor"] == 0.6
    assert [h["doc_id"] for h in strict["kept"]] == ["guide/key-rotation.md"]
    floored = {d["doc_id"] for d in strict["dropped"] if d["reason"] == "floor"}
    assert "ops/deploy.md" in floored
    [deploy] = [d for d in strict["dropped"] if d["doc_id"] == "ops/deploy.md"]
    assert deploy["relevance"] == pytest.approx(relevance["ops/deploy.md"])  # the same scale, not a default 0
    assert all(d["relevance"] < 0.6 for d in strict["dropped"] if d["reason"] == "floor")


async def test_a_try_neither_counts_nor_fills_the_answer_cache_and_publishes_nothing(rt: Runtime) -> None:
    seen: list[object] = []
    for kind in (AnswerLooked, Delivery, AuditEvent):
        rt.events.subscribe(kind, seen.append)
    cache = rt.answers()
    assert cache is not None and len(cache) == 0
    first = await try_.run(rt, try_.TryRequest("volcengine", QUERY, 3, tenant="acme", first="tech", second="software"))
    assert first.status == 200 and len(cache) == 0 and seen == []
    assert first.explain.traces[0].cache == "miss"
    audit = [orjson.loads(line) for line in (Path(rt.config.audit.path or "")).read_text().splitlines()]
    assert [(a["tool"], a["wing"], a["status"]) for a in audit] == [("admin.try", "admin", 200)]
    assert QUERY not in (Path(rt.config.audit.path or "")).read_text()


async def test_a_multi_route_search_says_what_the_merge_left_out(rt: Runtime) -> None:
    out = try_.to_json(await try_.run(rt, try_.TryRequest("mcp", QUERY, client="alice")))
    assert len(out["searches"]) == 3  # support, strict, again: one trace per route searched
    reasons = {m["reason"] for m in out["merged_out"]}
    assert "merged" in reasons  # the same page found through two routes is answered once
    results = orjson.loads(out["body"])["results"]
    assert len({r["url"] for r in results}) == len(results)


async def test_a_successor_is_searched_in_place_of_the_routes_index(rt: Runtime) -> None:
    base = try_.TryRequest("volcengine", QUERY, 3, tenant="acme", first="tech", second="software")
    a = try_.to_json(await try_.run(rt, base))
    b = try_.to_json(await try_.run(rt, try_.TryRequest(**{**_fields(base), "successor": "kb"})))
    assert _only(a)["index"] == "docs" and _only(b)["index"] == "kb"
    assert a["body"] != b["body"]  # another index, another answer (tests.support.documents: kb is not docs)


def _fields(req: try_.TryRequest) -> dict[str, Any]:
    return {name: getattr(req, name) for name in req.__dataclass_fields__}


@pytest.mark.parametrize(("over", "field"), [
    ({"caller": "fax"}, "caller"), ({"query": "  "}, "query"), ({"limit": 0}, "limit"),
    ({"successor": "nope"}, "successor"), ({"tenant": "nobody"}, "tenant"), ({"second": "x"}, "first/second"),
    ({"caller": "dify", "client": "alice"}, "route"), ({"caller": "tools", "client": "mallory"}, "client"),
    ({"caller": "tools", "client": "alice", "token_id": "t9"}, "token_id"),
])
async def test_a_try_the_config_cannot_run_is_refused_naming_the_field(rt: Runtime, over: dict[str, Any],
                                                                       field: str) -> None:
    req = try_.TryRequest(**{"caller": "volcengine", "query": QUERY, "tenant": "acme", "first": "tech",
                             "second": "software", **over})
    with pytest.raises(TryInvalid) as err:
        await try_.run(rt, req)
    assert err.value.field == field


async def test_a_try_shows_the_analysis_the_gap_verdict_and_why_each_chunk_is_out(rt: Runtime) -> None:
    out = try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", "密钥轮换 退役", 3, client="alice",
                                                           route="strict")))
    s = _only(out)
    words = {a["word"]: a for a in s["analysis"]}
    assert set(words) == {"密钥", "轮换", "退役"} and sum(a["weight"] for a in s["analysis"]) == pytest.approx(1.0)
    assert all(a["matched"] == "direct" for a in s["analysis"])  # the kept page holds every word
    assert s["gap"] == {"threshold": 0.3, "gap": False, "reason": "answered"} and out["gap"] == s["gap"]
    [deploy] = [d for d in s["dropped"] if d["doc_id"] == "ops/deploy.md"]
    assert deploy["reason"] == "floor" and "密钥" in deploy["terms"]  # matched some words, under the floor
    missing = try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", "火星基地的氧气配额", 3, client="alice",
                                                               route="strict")))
    m = _only(missing)
    assert m["gap"] == {"threshold": 0.3, "gap": True, "reason": "no_answer"}
    assert {a["matched"] for a in m["analysis"]} == {"unmatched"}
    assert m["kept"] == [] and m["dropped"] == []  # nothing shares a term with it
    # 第1 is no content word: the manual's "第1节" chunk holds a term of the question, not one of its words
    odd = _only(try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", "火星第1", 3, client="alice",
                                                                 route="strict"))))
    assert [a["word"] for a in odd["analysis"]] == ["火星"]
    reasons = {d["doc_id"]: d["reason"] for d in odd["dropped"]}
    assert reasons.get("long/manual.md") == "no_match", odd["dropped"]


async def test_words_matched_through_a_synonym_are_shown_as_such(rt: Runtime) -> None:
    import dataclasses

    from indexes.synonyms import parse as parse_synonyms

    rt.config = dataclasses.replace(rt.config, synonyms={"docs": parse_synonyms("凭证 => 密钥\n", "s.txt")})
    s = _only(try_.to_json(await try_.run(rt, try_.TryRequest("knowledge", "凭证轮换", 3, client="alice",
                                                               route="support"))))
    words = {a["word"]: (a["matched"], a["via"]) for a in s["analysis"]}
    assert words["凭证"] == ("synonym", "密钥") and words["轮换"] == ("direct", "")
    assert {"synonym": "密钥", "term": "凭证"} in s["kept"][0]["synonym_terms"]
    assert all({"synonym": "密钥", "term": "凭证"} in d["synonym_terms"] for d in s["dropped"] if "密钥" in d["title"])
