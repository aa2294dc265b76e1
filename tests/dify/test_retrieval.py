"""gateway/dify/retrieval.py through the ASGI app: the answer, every error code, scope denial
and narrowing, metadata conditions over HTTP, audit lines and per-wing metrics.

A real Tantivy index with metadata, a real Redis nonce store, every body checked against
gateway/dify/schemas/*.json.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.dify.conftest import (
    DIFY_KEY,
    KEYS,
    NARROW_KEY,
    NOGRANT_KEY,
    VISIBLE,
    AppFactory,
    DifyApp,
    dify_config,
    error,
    records,
    request_body,
)
from tests.support.configs import parse

pytestmark = pytest.mark.anyio


def _cond(*conds: tuple[str, str, object], logic: str | None = "and") -> dict[str, object]:
    return {"logical_operator": logic,
            "conditions": [{"name": n, "comparison_operator": op, "value": v} for n, op, v in conds]}


async def test_answer_shape_and_record_metadata(dify_app: AppFactory) -> None:
    a = await dify_app()
    got = records(await a.post(request_body(query="旧密钥退役")))
    assert got and got[0]["title"] == "密钥轮换"
    top = got[0]
    assert top["metadata"] == {"document_id": "guide/key-rotation.md", "path": "guide/key-rotation.md",
                               "url": "https://kb.example.com/guide/key-rotation", "dataset": "public",
                               "publish_time": 1_714_521_600, "author": "张三", "tags": ["运维", "密钥"],
                               "version": 3, "released": "2024-05-01"}
    assert "新旧两把密钥可以同时生效" in top["content"]
    scores = [r["score"] for r in got]
    assert scores == sorted(scores, reverse=True) and all(0 < s < 1 for s in scores)
    assert {r["metadata"]["document_id"] for r in got} <= VISIBLE  # never config/, working/, hidden


async def test_nothing_found_is_an_empty_list(dify_app: AppFactory) -> None:
    a = await dify_app()
    assert records(await a.post(request_body(query="量子纠缠的哈密顿量"))) == []


async def test_top_k_clamped_and_defaulted(dify_app: AppFactory) -> None:
    a = await dify_app()
    q = "密钥"
    full = records(await a.post(request_body(query=q, retrieval_setting={"top_k": 100, "score_threshold": 0.0})))
    assert len(full) == 4  # max_top_k 5, and only 4 documents are visible
    assert len(records(await a.post(request_body(query=q, retrieval_setting={"top_k": None})))) == 3  # default_top_k
    assert len(records(await a.post(request_body(query=q, retrieval_setting=None)))) == 3
    assert len(records(await a.post(request_body(query=q, retrieval_setting={"top_k": 2.0})))) == 2


async def test_score_threshold_applied_to_relevance_never_lowered(dify_app: AppFactory) -> None:
    a = await dify_app()
    query = "密钥轮换"  # matched to a different degree by several pages
    everything = records(await a.post(request_body(query=query, retrieval_setting={"top_k": 5})))
    scores = sorted({r["score"] for r in everything}, reverse=True)
    assert len(scores) >= 2
    cut = (scores[0] + scores[1]) / 2
    kept = records(await a.post(request_body(query=query, retrieval_setting={"top_k": 5, "score_threshold": cut})))
    assert kept == [r for r in everything if r["score"] >= cut] and 0 < len(kept) < len(everything)
    assert records(await a.post(request_body(query=query, retrieval_setting={"top_k": 5, "score_threshold": 1})))\
        == [r for r in everything if r["score"] == 1.0]


async def test_content_bounded_by_config(dify_app: AppFactory) -> None:
    a = await dify_app(dify={"content_chars": 60})
    got = records(await a.post(request_body(query="密钥")))
    assert got and all(len(r["content"]) <= 60 for r in got)


# ------------------------------------------------------------------ scope


async def test_scope_denial_is_2001_and_never_touches_text(dify_app: AppFactory) -> None:
    a = await dify_app()
    for kid in ("nosuch", "config", "ops-only"):  # unknown, unknown, and a route NARROW_KEY is not given
        msg = error(await a.post(request_body(knowledge_id=kid), NARROW_KEY), 404, 2001)
        assert f"'{kid}'" in msg
    lines = a.audit()
    assert [ln["outcome"] for ln in lines] == ["denied"] * 3
    assert all(ln["code"] == "dify.knowledge_unknown" and ln["cause"] == "access.forbidden_scope" for ln in lines)


async def test_scope_narrows_to_the_policy(dify_app: AppFactory) -> None:
    a = await dify_app()
    narrow = records(await a.post(request_body(query="密钥", retrieval_setting={"top_k": 5}), NARROW_KEY))
    assert {r["metadata"]["document_id"] for r in narrow} == {"guide/key-rotation.md"}  # public ∩ guide/**
    ops = records(await a.post(request_body(knowledge_id="ops-only", query="密钥", retrieval_setting={"top_k": 5})))
    assert {r["metadata"]["document_id"] for r in ops} == {"ops/deploy.md", "ops/backup.md"}


async def test_a_condition_cannot_widen_the_scope(dify_app: AppFactory) -> None:
    a = await dify_app()
    wide = _cond(("path", "start with", "ops/"), ("dataset", "is", "internal"), ("path", "start with", "config/"),
                 logic="or")
    got = records(await a.post(request_body(query="密钥", metadata_condition=wide), NARROW_KEY))
    assert got == []  # everything the 'or' names lies outside the key's scope
    got = records(await a.post(request_body(knowledge_id="ops-only", query="密钥",
                                            metadata_condition=_cond(("path", "contains", "guide/")))))
    assert got == []


async def test_unknown_metadata_names_match_nothing(dify_app: AppFactory) -> None:
    a = await dify_app()
    for op in ("empty", "not empty", "is not", "≠"):
        body = request_body(query="密钥", metadata_condition=_cond(("no_such_field", op, "x")))
        assert records(await a.post(body)) == [], op


# ------------------------------------------------------------------ errors


async def test_registration_without_body_is_400_and_wrong_key_403(dify_app: AppFactory) -> None:
    a = await dify_app()
    r = await a.http.post("/dify/retrieval", headers={"authorization": f"Bearer {DIFY_KEY}"})
    msg = error(r, 400, 4001)
    assert "key is valid" in msg
    r = await a.http.post("/dify/retrieval", headers={"authorization": "Bearer not-a-key-of-this-gateway"})
    error(r, 403, 1002)
    r = await a.http.post("/dify/retrieval", headers={"authorization": f"Bearer {NOGRANT_KEY}"})
    assert "not granted dify.retrieval" in error(r, 403, 1002)  # the grant is checked before the body


@pytest.mark.parametrize("auth", [None, "", "Basic abc", "Bearer", "Bearer short", "Bearer has space in it ok"])
async def test_malformed_authorization_is_1001(dify_app: AppFactory, auth: str | None) -> None:
    a = await dify_app()
    headers = {"content-type": "application/json"} | ({"authorization": auth} if auth is not None else {})
    r = await a.http.post("/dify/retrieval", content=b"{}", headers=headers)
    assert "Bearer" in error(r, 403, 1001)


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "bEaReR"])
async def test_the_bearer_scheme_is_read_in_any_case(dify_app: AppFactory, scheme: str) -> None:
    # RFC 7235 §2.1: "bearer <key>" was 1001 "a Bearer token is required".
    a = await dify_app()
    r = await a.post(key=None, headers={"authorization": f"{scheme} {DIFY_KEY}"})
    assert records(r) and a.audit()[-1]["principal"]["id"] == "app"


async def test_repeated_authorization_is_1001(dify_app: AppFactory) -> None:
    a = await dify_app()
    r = await a.http.post("/dify/retrieval", content=b"{}", headers=[
        ("authorization", f"Bearer {DIFY_KEY}"), ("authorization", f"Bearer {DIFY_KEY}")])
    error(r, 403, 1001)


@pytest.mark.parametrize(("body", "field"), [
    ({"query": "密钥"}, "knowledge_id"),
    ({"knowledge_id": "handbook"}, "query"),
    ({"knowledge_id": "handbook", "query": "   "}, "query"),
    ({"knowledge_id": 7, "query": "q"}, "knowledge_id"),
    (request_body(valid=False, retrieval_setting=[]), "retrieval_setting"),
    (request_body(valid=False, retrieval_setting={"top_k": "5"}), "retrieval_setting.top_k"),
    (request_body(valid=False, retrieval_setting={"top_k": True}), "retrieval_setting.top_k"),
    (request_body(valid=False, retrieval_setting={"score_threshold": "high"}), "retrieval_setting.score_threshold"),
    (request_body(valid=False, retrieval_setting={"score_threshold": 2}), "score_threshold must be a number from 0"),
    (request_body(valid=False, retrieval_setting={"score_threshold": -1}), "score_threshold must be a number from 0"),
    (request_body(valid=False, retrieval_setting={"top_k": 0}), "retrieval_setting.top_k must be a positive integer"),
    (request_body(valid=False, retrieval_setting={"top_k": -1}), "retrieval_setting.top_k must be a positive integer"),
    (request_body(valid=False, retrieval_setting={"top_k": 2.5}), "retrieval_setting.top_k must be a positive integer"),
    (request_body(valid=False, metadata_condition=_cond(("version", ">", "1e309"))), "conditions[0].value must be a "
                                                                                       "finite number"),
    (request_body(valid=False, metadata_condition=[]), "metadata_condition"),
    (request_body(valid=False, metadata_condition={"logical_operator": "xor", "conditions": []}),
     "metadata_condition.logical_operator"),
    (request_body(valid=False, metadata_condition={"conditions": "author"}), "metadata_condition.conditions"),
    (request_body(valid=False, metadata_condition=_cond(("author", "like", "x"))), "metadata_condition.conditions[0]"),
    (request_body(valid=False, metadata_condition=_cond(("", "is", "x"))), "metadata_condition.conditions[0].name"),
    (request_body(valid=False, metadata_condition=_cond(("version", ">", "many"))), "conditions[0].value"),
    (request_body(valid=False, metadata_condition=_cond(("released", "after", "soon"))), "conditions[0].value"),
    (request_body(valid=False, metadata_condition=_cond(("author", "contains", ["a"]))), "conditions[0].value"),
    (request_body(valid=False, metadata_condition=_cond(("author", "contains", "长" * 65))), "conditions[0].value"),
    (request_body(valid=False, metadata_condition=_cond(("author", "in", []))), "conditions[0].value"),
    (request_body(valid=False, metadata_condition=_cond(("author", "is", {"a": 1}))), "conditions[0].value"),
])
async def test_malformed_request_is_4000_naming_the_field(dify_app: AppFactory, body: dict[str, object],
                                                          field: str) -> None:
    a = await dify_app()
    assert field in error(await a.post(body), 400, 4000)


async def test_body_errors(dify_app: AppFactory) -> None:
    a = await dify_app()
    error(await a.post(raw=b"not json"), 400, 4000)
    error(await a.post(raw=b"[1]"), 400, 4000)
    error(await a.post(raw=b"\xff\xfe"), 400, 4000)
    error(await a.post(raw=b"{}", headers={"content-type": "text/plain"}), 415, 4150)
    error(await a.post(raw=b"{}", headers={"content-encoding": "gzip"}), 415, 4150)
    error(await a.post(raw=b'{"query":"' + b"x" * 70_000 + b'"}'), 413, 4130)
    error(await a.post(request_body(query="密" * 2001)), 400, 4000)


def test_what_counts_as_no_body() -> None:
    from starlette.datastructures import Headers

    from gateway.dify.retrieval import _no_body

    assert _no_body(Headers({"content-length": "0"})) and _no_body(Headers({}))
    assert not _no_body(Headers({"content-length": "12"}))
    assert not _no_body(Headers({"transfer-encoding": "chunked"}))


async def test_chunked_empty_body_is_request_invalid(dify_app: AppFactory) -> None:
    a = await dify_app()

    async def nothing():  # type: ignore[no-untyped-def]
        yield b""

    r = await a.http.post("/dify/retrieval", content=nothing(), headers={"authorization": f"Bearer {DIFY_KEY}"})
    assert "not JSON" in error(r, 400, 4000)


async def test_skipped_conditions_are_in_the_audit_line(dify_app: AppFactory) -> None:
    a = await dify_app()
    body = request_body(query="密钥", metadata_condition=_cond(("author", "is", None), ("path", "start with", "ops/")))
    assert {r["metadata"]["document_id"] for r in records(await a.post(body))} == {"ops/deploy.md", "ops/backup.md"}
    [line] = a.audit()
    assert line["conditions"] == 1 and line["conditions_skipped"] == 1


async def test_other_methods_are_405(dify_app: AppFactory) -> None:
    a = await dify_app()
    for method in ("GET", "PUT", "DELETE"):
        r = await a.http.request(method, "/dify/retrieval", headers={"authorization": f"Bearer {DIFY_KEY}"})
        error(r, 405, 4050)
        assert r.headers["allow"] == "POST"


async def test_disabled_route_and_missing_index_are_5030(dify_app: AppFactory) -> None:
    a = await dify_app()
    assert "disabled" in error(await a.post(request_body(knowledge_id="off")), 503, 5030)
    assert "cannot be searched" in error(await a.post(request_body(knowledge_id="gone")), 503, 5030)


async def test_prefix_is_configurable(dify_app: AppFactory) -> None:
    a = await dify_app(dify={"prefix": "/kb/dify"})
    assert records(await a.post(path="/kb/dify/retrieval"))
    assert (await a.post(path="/dify/retrieval")).status_code == 404


# ------------------------------------------------------------------ audit and metrics


async def test_every_answer_is_one_audit_line_naming_the_wing(dify_app: AppFactory) -> None:
    a = await dify_app()
    await a.post()
    await a.post(key="wrong-key-0123456789abcdef")
    await a.post(request_body(knowledge_id="nosuch"))
    await a.http.post("/dify/retrieval", headers={"authorization": f"Bearer {DIFY_KEY}"})
    lines = a.audit()
    assert [(ln["wing"], ln["tool"], ln["status"], ln["code"]) for ln in lines] == [
        ("dify", "dify.retrieval", 200, None), ("dify", "dify.retrieval", 403, "dify.authorization_failed"),
        ("dify", "dify.retrieval", 404, "dify.knowledge_unknown"), ("dify", "dify.retrieval", 400, "dify.body_empty")]
    assert lines[0]["route"] == "handbook" and lines[0]["principal"]["id"] == "app"
    assert lines[0]["records"] >= 1 and lines[0]["top_k"] == 5 and lines[0]["scope"]["index"] == "handbook"
    text = (a.root / "audit.jsonl").read_text("utf-8")
    assert not any(k in text for k in KEYS) and "密钥轮换" not in text  # no key, no query


async def test_metrics_per_wing(dify_app: AppFactory) -> None:
    a = await dify_app()
    await a.post()
    await a.post()
    await a.post(key="wrong-key-0123456789abcdef")
    await a.http.post("/agent-api/v1/workspaces/handbook/knowledge/search", content=b'{"query":"x"}',
                      headers={"authorization": f"Bearer {DIFY_KEY}", "content-type": "application/json"})
    text = (await a.http.get("/metrics")).text
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value
         for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert m[("kbgate_wing_requests_total", (("outcome", "passed"), ("wing", "dify")))] == 2
    assert m[("kbgate_wing_requests_total", (("outcome", "denied"), ("wing", "dify")))] == 1
    assert m[("kbgate_wing_errors_total", (("code", "dify.authorization_failed"), ("wing", "dify")))] == 1
    assert m[("kbgate_wing_duration_seconds_count", (("wing", "dify"),))] == 3
    assert m[("kbgate_wing_requests_total", (("outcome", "denied"), ("wing", "agent")))] == 1  # no knowledge grant
    assert not any(k in text for k in KEYS)



async def test_a_stored_publish_time_in_milliseconds_is_unix_seconds(tmp_path: Path, start_app: Any,
                                                                    redis_url: str, key_prefix: str) -> None:
    # An index built before indexes.publish_time may hold milliseconds: the record says seconds
    # (as ingest now reads them), and a value no time has is left out, never a failure.
    indexes = tmp_path / "indexes"
    IndexStore(indexes).create_or_open_for_write("handbook").ingest([
        Document("ms.md", "毫秒", (Section("", "MSTIMEWORD 毫秒时间戳"),), path="ms.md",
                 publish_time=1_764_580_000_000),
        Document("big.md", "巨大", (Section("", "MSTIMEWORD 溢出时间戳"),), path="big.md",
                 publish_time=9_000_000_000_000_000_000)], progress=False)
    cfg = parse(dify_config(tmp_path, indexes, redis_url=redis_url, key_prefix=key_prefix), tmp_path)
    http, app, _ = await start_app(cfg)
    a = DifyApp(http, app, tmp_path)
    got = {r["metadata"]["document_id"]: r["metadata"] for r in records(await a.post(request_body(query="MSTIMEWORD")))}
    assert got["ms.md"]["publish_time"] == 1_764_580_000 and "publish_time" not in got["big.md"]
