"""gateway/volcengine/handler.py through the ASGI app: every rejection reason, one test each.

The app runs with the one test index and a real Redis nonce store (tests/volcengine/conftest.py);
the clock is injected so tolerance boundaries are exact.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.core.clock import FixedClock
from gateway.core.replay import RedisNonceStore
from gateway.serve.app import create_app
from gateway.volcengine.signing import sign_headers
from tests.support.callbacks import assert_rejected, body_of, callback_config
from tests.support.configs import ENV, NOW, SECRET_ACME, SECRET_ACME_OLD, config, parse, tenant
from tests.support.harness import free_port

SECRET_OLD, SECRET_NEW = SECRET_ACME_OLD, SECRET_ACME
Client = Callable[..., Any]


async def post(c: httpx.AsyncClient, body: bytes, *, secret: str = SECRET_NEW, ts: int = NOW,
               nonce: str | None = None, headers: dict[str, str] | None = None,
               path: str = "/volcengine/acme") -> httpx.Response:
    h = sign_headers(secret, body, ts, nonce)
    h.update(headers or {})
    return await c.post(path, content=body, headers=h)


# ------------------------------------------------------------------ success


@pytest.mark.anyio
async def test_success_envelope_and_items(client: Client) -> None:
    c = await client()
    r = await post(c, body_of())
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/json")
    env = orjson.loads(r.content)
    assert env["Ret"] == 0 and env["Msg"] == "success"
    first = env["Result"][0]
    assert first["Id"] == "kb-1"
    assert first["Title"] == "密钥轮换"
    assert first["Url"] == "https://kb.example.com/1"
    assert first["PublishTime"] == 1_700_000_000
    assert first["CoverImage"] == {"Url": "https://kb.example.com/1.png", "Height": 300, "Width": 400}
    assert "密钥" in first["Summary"] and "<" not in first["Summary"]
    assert "新旧两把密钥" in first["KnowledgeContent"]
    ids = [i["Id"] for i in env["Result"]]
    assert len(ids) == len(set(ids))
    # compact JSON, real UTF-8 (no \\u escapes)
    assert b'": ' not in r.content and "密钥".encode() in r.content


@pytest.mark.anyio
async def test_unknown_optional_fields_are_omitted(client: Client) -> None:
    c = await client()
    env = orjson.loads((await post(c, body_of(Query="随机串 重复投递"))).content)
    item = next(i for i in env["Result"] if i["Id"] == "kb-3")
    assert "Url" not in item and "PublishTime" not in item and "CoverImage" not in item


@pytest.mark.anyio
async def test_traditional_and_simplified_match_each_other(client: Client) -> None:
    # 金鑰 folds to 金钥, a word these documents never use (they say 密钥): only 轮换 matches, a
    # relevance under the default floor, so this test of folding turns the floor off.
    c = await client(relevance_floor=0)
    env = orjson.loads((await post(c, body_of(Query="软件安装"))).content)
    assert env["Result"][0]["Id"] == "kb-2"
    env = orjson.loads((await post(c, body_of(Query="金鑰輪換"))).content)
    assert env["Result"][0]["Id"] == "kb-1"


@pytest.mark.anyio
async def test_numeric_level_ids_are_taken_as_strings(client: Client) -> None:
    c = await client()
    r = await post(c, orjson.dumps({"FirstLevelId": 1, "SecondLevelId": 2, "Query": "密钥", "Limit": 1}))
    assert r.status_code == 200
    assert len(orjson.loads(r.content)["Result"]) == 1


@pytest.mark.anyio
async def test_limit_default_and_clamp(client: Client) -> None:
    c = await client()
    env = orjson.loads((await post(c, body_of(Query="密钥 安装 随机串", Limit=...))).content)
    assert len(env["Result"]) == 3  # default_limit
    env = orjson.loads((await post(c, body_of(Query="密钥 安装 随机串", Limit=10_000))).content)
    assert 1 <= len(env["Result"]) <= 10


@pytest.mark.anyio
async def test_rotation_both_keys_pass(client: Client) -> None:
    c = await client()
    assert (await post(c, body_of(), secret=SECRET_OLD)).status_code == 200
    assert (await post(c, body_of(), secret=SECRET_NEW)).status_code == 200


# ------------------------------------------------------------------ headers and signature


@pytest.mark.anyio
@pytest.mark.parametrize("header", ["X-Content-Timestamp", "X-Content-Nonce", "X-Content-Signature"])
async def test_header_missing(client: Client, header: str) -> None:
    c = await client()
    body = body_of()
    h = sign_headers(SECRET_NEW, body, NOW)
    del h[header]
    assert_rejected(await c.post("/volcengine/acme", content=body, headers=h), "header_missing")


@pytest.mark.anyio
async def test_header_repeated(client: Client) -> None:
    c = await client()
    body = body_of()
    h = sign_headers(SECRET_NEW, body, NOW)
    raw = [(k, v) for k, v in h.items()] + [("X-Content-Nonce", "Another123")]
    assert_rejected(await c.post("/volcengine/acme", content=body, headers=raw), "header_repeated")


@pytest.mark.anyio
async def test_timestamp_invalid(client: Client) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(), headers={"X-Content-Timestamp": "18000000000"}), "timestamp_invalid")


@pytest.mark.anyio
@pytest.mark.parametrize("delta", [-3601, 3601])
async def test_timestamp_outside_tolerance(client: Client, delta: int) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(), ts=NOW + delta), "timestamp_expired")


@pytest.mark.anyio
@pytest.mark.parametrize("delta", [-3600, -3599, 3599, 3600])
async def test_timestamp_at_tolerance_passes(client: Client, delta: int) -> None:
    c = await client()
    assert (await post(c, body_of(), ts=NOW + delta)).status_code == 200


@pytest.mark.anyio
async def test_lower_tolerance_configured(client: Client) -> None:
    c = await client(tolerance=60)
    assert (await post(c, body_of(), ts=NOW - 60)).status_code == 200
    assert_rejected(await post(c, body_of(), ts=NOW - 61), "timestamp_expired")


@pytest.mark.anyio
@pytest.mark.parametrize(("sent", "reason"), [({"nonce": "abc"}, "nonce_invalid"),
                                              ({"headers": {"X-Content-Signature": "zz" * 32}}, "signature_invalid"),
                                              ({"secret": "not-the-key"}, "signature_mismatch")])
async def test_a_bad_nonce_or_signature_is_refused_naming_it(client: Client, sent: dict[str, Any],
                                                             reason: str) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(), **sent), reason)


@pytest.mark.anyio
async def test_body_altered_after_signing(client: Client) -> None:
    c = await client()
    body = body_of()
    h = sign_headers(SECRET_NEW, body, NOW)
    altered = orjson.loads(body)
    assert_rejected(await c.post("/volcengine/acme", content=orjson.dumps(altered, option=orjson.OPT_INDENT_2),
                                 headers=h), "signature_mismatch")


@pytest.mark.anyio
async def test_no_live_key(tmp_path: Path, docs_index: Path, redis_url: str) -> None:
    acme = tenant("acme", keys=[("k", "env:ACME_OLD")], routes=[("a", "b", "docs")])
    acme["acme"]["secrets"][0]["not_after"] = NOW - 1
    cfg = parse(config(tmp_path, tenants=[acme], indexes=docs_index), tmp_path, ENV)
    clock = FixedClock(float(NOW))
    app = create_app(cfg, clock=clock)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        r = await post(c, body_of(FirstLevelId="a", SecondLevelId="b"), secret=SECRET_OLD)
    assert_rejected(r, "no_live_key")


# ------------------------------------------------------------------ replay


@pytest.mark.anyio
async def test_replay_rejected(client: Client) -> None:
    c = await client()
    body = body_of()
    assert (await post(c, body, nonce="Fixed12345")).status_code == 200
    assert_rejected(await post(c, body, nonce="Fixed12345"), "replayed")


@pytest.mark.anyio
async def test_replay_claim_only_after_signature(client: Client) -> None:
    c = await client()
    body = body_of()
    assert_rejected(await post(c, body, nonce="Burn123456", secret="attacker"), "signature_mismatch")
    assert (await post(c, body, nonce="Burn123456")).status_code == 200


@pytest.mark.anyio
async def test_concurrent_duplicate_deliveries_exactly_one_wins(client: Client) -> None:
    c = await client()
    body = body_of()
    h = sign_headers(SECRET_NEW, body, NOW, "Race123456")
    rs = await asyncio.gather(*[c.post("/volcengine/acme", content=body, headers=h) for _ in range(20)])
    codes = sorted(r.status_code for r in rs)
    assert codes.count(200) == 1
    assert codes.count(409) == 19


@pytest.mark.anyio
async def test_redis_down_is_a_fast_503(docs_index: Path) -> None:
    cfg = callback_config(docs_index)
    clock = FixedClock(float(NOW))
    app = create_app(cfg, clock=clock, nonces=RedisNonceStore(f"redis://127.0.0.1:{free_port()}/0", 1.0, clock))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
        t0 = time.perf_counter()
        r = await post(c, body_of())
        took = time.perf_counter() - t0
    # A refused connection is not a slow Redis: Msg said "did not answer in time" for both.
    assert assert_rejected(r, "replay_store_unavailable")["Msg"] == "Redis is unreachable; fail closed"
    assert took < 2.0


@pytest.mark.anyio
async def test_a_redis_that_never_answers_is_a_503_that_says_so(docs_index: Path) -> None:
    import socket

    srv = socket.socket()  # accepts, never answers: a hung Redis, not a refused one
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    try:
        cfg = callback_config(docs_index)
        clock = FixedClock(float(NOW))
        store = RedisNonceStore(f"redis://127.0.0.1:{srv.getsockname()[1]}/0", 0.5, clock)
        app = create_app(cfg, clock=clock, nonces=store)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            r = await post(c, body_of())
        await store.close()
    finally:
        srv.close()
    assert assert_rejected(r, "replay_store_unavailable")["Msg"] == "Redis did not answer in time; fail closed"


# ------------------------------------------------------------------ body


@pytest.mark.anyio
@pytest.mark.parametrize(("raw", "reason"), [
    (b"\xff\xfe{}", "body_not_utf8"),
    (b"{not json", "body_not_json"),
    (b"", "body_not_json"),
    (b"[1,2]", "body_not_object"),
    (b'{"SecondLevelId":"software","Query":"q"}', "field_missing"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software"}', "field_missing"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":5}', "field_type"),
    (b'{"FirstLevelId":["tech"],"SecondLevelId":"software","Query":"q"}', "field_type"),
    (b'{"FirstLevelId":true,"SecondLevelId":"software","Query":"q"}', "field_type"),
    (b'{"FirstLevelId":"","SecondLevelId":"software","Query":"q"}', "level_id_invalid"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"  "}', "query_empty"),
    ('{"FirstLevelId":"tech","SecondLevelId":"software","Query":"\u200b\u3000\u200b"}'.encode(), "query_empty"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"' + "长".encode() * 101 + b'"}', "query_too_long"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"q","Limit":0}', "limit_invalid"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"q","Limit":-3}', "limit_invalid"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"q","Limit":"5"}', "limit_invalid"),
    (b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"q","Limit":2.5}', "limit_invalid"),
])
async def test_malformed_body(client: Client, raw: bytes, reason: str) -> None:
    c = await client()
    assert_rejected(await post(c, raw), reason)


@pytest.mark.anyio
async def test_query_length_counts_characters_not_bytes(client: Client) -> None:
    c = await client()
    r = await post(c, body_of(Query="长" * 100))  # 100 characters, 300 bytes
    assert r.status_code == 200


@pytest.mark.anyio
async def test_body_too_large(client: Client) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(Query="x" * 5000)), "body_too_large")


@pytest.mark.anyio
async def test_body_too_large_streamed_without_content_length(client: Client) -> None:
    c = await client()
    body = body_of(Query="x" * 5000)
    h = sign_headers(SECRET_NEW, body, NOW)

    async def chunks() -> AsyncIterator[bytes]:
        for i in range(0, len(body), 512):
            yield body[i:i + 512]

    assert_rejected(await c.post("/volcengine/acme", content=chunks(), headers=h), "body_too_large")


@pytest.mark.anyio
async def test_content_encoding_unsupported(client: Client) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(), headers={"Content-Encoding": "gzip"}), "content_encoding_unsupported")


@pytest.mark.anyio
async def test_content_type_unsupported(client: Client) -> None:
    c = await client()
    r = await post(c, body_of(), headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert_rejected(r, "content_type_unsupported")


@pytest.mark.anyio
async def test_content_type_with_charset_accepted(client: Client) -> None:
    c = await client()
    r = await post(c, body_of(), headers={"Content-Type": "application/json; charset=UTF-8"})
    assert r.status_code == 200


# ------------------------------------------------------------------ routing


@pytest.mark.anyio
async def test_route_unknown_names_the_pair(client: Client) -> None:
    c = await client()
    env = assert_rejected(await post(c, body_of(SecondLevelId="hardware")), "route_unknown")
    assert "hardware" in env["Msg"] and "tech" in env["Msg"]


@pytest.mark.anyio
async def test_tenant_unknown(client: Client) -> None:
    c = await client()
    assert_rejected(await post(c, body_of(), path="/volcengine/nobody"), "tenant_unknown")


@pytest.mark.anyio
async def test_method_not_allowed(client: Client) -> None:
    c = await client()
    for method in ("GET", "PUT", "DELETE"):
        r = await c.request(method, "/volcengine/acme")
        assert_rejected(r, "method_not_allowed")
        assert r.headers["allow"] == "POST"  # RFC 9110 §15.5.6: a 405 lists the allowed methods


@pytest.mark.anyio
async def test_index_unavailable(client: Client) -> None:
    c = await client()
    env = assert_rejected(await post(c, body_of(SecondLevelId="missing")), "index_unavailable")
    assert "/" not in env["Msg"].replace("index 'absent'", "")  # no filesystem path


# ------------------------------------------------------------------ never a 500


@pytest.mark.anyio
async def test_fuzzed_bodies_never_500(client: Client) -> None:
    import random

    c = await client()
    rnd = random.Random(7)
    seeds = [body_of(), b"{}", b"null", b'{"Query":{}}', b'{"Limit":1e400}', b"{\"Query\":\"\\ud800\"}"]
    for i in range(200):
        b = bytearray(rnd.choice(seeds))
        for _ in range(rnd.randint(0, 4)):
            if b:
                b[rnd.randrange(len(b))] = rnd.randrange(256)
        r = await post(c, bytes(b), nonce=f"Fuzz{i:06d}")
        assert r.status_code < 500 or r.status_code == 503, r.text
        assert "Ret" in orjson.loads(r.content)


# ------------------------------------------------------------------ request id and bugs


@pytest.mark.anyio
@pytest.mark.parametrize(("sent", "echoed"), [
    (["trace-42"], "trace-42"),
    (["a.b_c:d-9"], "a.b_c:d-9"),
    (["first-1", "second-2"], "first-1"),  # the first one wins
    (["x" * 65], None),  # too long
    (["bad id with spaces"], None),
    (["中文"], None),  # not ASCII
    ([], None),
])
async def test_a_callers_request_id_is_echoed_only_when_it_is_a_plain_token(
        client: Client, sent: list[str], echoed: str | None) -> None:
    c = await client()
    raw = body_of()
    headers = [*sign_headers(SECRET_NEW, raw, NOW).items(), *(("x-request-id", v.encode()) for v in sent)]
    r = await c.post("/volcengine/acme", content=raw, headers=headers)
    assert r.status_code == 200
    got = r.headers["x-request-id"]
    if echoed is not None:
        assert got == echoed
    else:
        assert len(got) == 16 and int(got, 16) >= 0 and got not in sent  # a fresh one


@pytest.mark.anyio
async def test_a_bug_is_the_internal_error_envelope_without_detail(client: Client, monkeypatch: pytest.MonkeyPatch,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    from gateway.volcengine import handler

    def boom(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("kaboom at /srv/secret/path")

    monkeypatch.setattr(handler, "parse_body", boom)
    c = await client()
    r = await c.post("/volcengine/acme", content=body_of(), headers={**sign_headers(SECRET_NEW, body_of(), NOW),
                                                                     "x-request-id": "bug-report-1"})
    env = assert_rejected(r, "internal")
    assert (r.status_code, env["Ret"], env["Msg"]) == (500, 50001, "internal error")
    assert "kaboom" not in r.text and "Traceback" not in r.text
    assert r.headers["x-request-id"] == "bug-report-1"
    logged = [rec for rec in caplog.records if rec.name == "kbgate.callback" and rec.exc_info]
    assert logged and getattr(logged[0], "request_id", None) == "bug-report-1"  # the trace is in the log
