"""bench.minimal: the hand-built minimal gateway `make bench` compares kbgate with.

Its figures mean something only if it does the work of a correct callback: it must answer a
correctly signed callback with results from its own index, and refuse a replay of it and a
wrong signature, as kbgate does. Real hypercorn, real Redis, a real index of TiDB documents.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest

from bench.phases import run_phase
from bench.stack import write_routes_config
from bench.workload import callback_body
from gateway.volcengine.signing import sign_headers
from tests.support.harness import Server, free_port
from tests.support.paths import corpora_or_skip

pytestmark = pytest.mark.corpus


def _post(base: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{base}/volcengine/bench", content=body, timeout=10.0,
                      headers={"Content-Type": "application/json", **headers})


def test_minimal_gateway_answers_signed_callbacks_and_refuses_replays_and_bad_signatures(
        redis_url: str, tmp_path: Path) -> None:
    corpora_or_skip()
    built = run_phase(["minimal-index", "--dir", str(tmp_path / "minimal"), "--index", "tidb-docs-cn",
                       "--corpus", "tidb-docs-cn", "--limit", "40"])
    assert built["documents"] == 40 and int(built["chunks"]) > 40  # one chunk per section
    port = free_port()
    cc = write_routes_config(tmp_path, tmp_path / "indexes", {"tidb-docs-cn": "tidb-docs-cn"}, port, 1, redis_url)
    secret = cc.secret_file.read_text().strip()
    env = {"BENCH_MINIMAL_SECRET": str(cc.secret_file), "BENCH_MINIMAL_REDIS": redis_url,
           "BENCH_MINIMAL_INDEXES": str(tmp_path / "minimal"), "BENCH_MINIMAL_PREFIX": f"test-minimal-{port}"}
    argv = [sys.executable, "-m", "bench.minimal", "--config", str(cc.config), "--bind", f"127.0.0.1:{port}",
            "--workers", "1"]
    with Server(argv, port, tmp_path / "minimal.log", env=env) as srv:
        body = callback_body("bench", "tidb-docs-cn", "TiDB 如何部署")
        signed = sign_headers(secret, body, int(time.time()))
        first = _post(srv.base, body, signed)
        assert first.status_code == 200, first.text
        answer = orjson.loads(first.content)
        assert answer["Ret"] == 0 and 1 <= len(answer["Result"]) <= 5
        ids = [r["Id"] for r in answer["Result"]]
        assert len(set(ids)) == len(ids)  # distinct documents
        for r in answer["Result"]:
            assert r["Title"] and 0 < len(r["Summary"]) <= 200 and len(r["Summary"]) <= len(r["KnowledgeContent"])
            assert len(r["KnowledgeContent"]) <= 1500 and r["KnowledgeContent"].startswith(r["Summary"])

        again = _post(srv.base, body, signed)  # the same delivery: a replay
        assert again.status_code == 409 and orjson.loads(again.content)["Result"] == []

        forged = dict(sign_headers(secret, body, int(time.time())))
        forged["X-Content-Signature"] = "0" * 64
        assert _post(srv.base, body, forged).status_code == 401
        wrong_key = sign_headers(secret + "x", body, int(time.time()))
        assert _post(srv.base, body, wrong_key).status_code == 401
        stale = sign_headers(secret, body, int(time.time()) - 3600)
        assert _post(srv.base, body, stale).status_code == 401
        tampered = sign_headers(secret, body, int(time.time()))
        assert _post(srv.base, body.replace("部署".encode(), "安装".encode()), tampered).status_code == 401
        unsigned = _post(srv.base, body, {})
        assert unsigned.status_code == 400

        fresh = sign_headers(secret, callback_body("bench", "tidb-docs-cn", "TiDB 如何部署"), int(time.time()))
        assert _post(srv.base, body, fresh).status_code == 200  # a new nonce is a new delivery
