"""Embedding providers against a REAL local HTTP server (tests/embedding_server.py: Starlette
under hypercorn, embedding with the wheel-shipped USE model): batching, retries with backoff,
Retry-After, timeouts, server down or slow, the circuit breaker, and the lexical fallback of a
hybrid index when the provider fails."""

from __future__ import annotations

import time
from concurrent.futures import wait
from pathlib import Path

import httpx
import numpy as np
import pytest

from indexes.dense.config import ApiKey, DenseConfig
from indexes.dense.index import HybridIndex, HybridStore
from indexes.dense.providers import LocalEmbedder, OpenAIEmbedder
from indexes.dense.query import Breaker, QueryEncoder
from indexes.errors import EmbeddingResponseError, EmbeddingUnavailable
from indexes.store import IndexStore
from tests.support.documents import HYBRID_DOCS, PARAPHRASE
from tests.support.embedding_server import running
from tests.support.harness import free_port
from tests.support.local_server import control, module_fixture, reset_fixture
from tests.support.polling import until

MODEL = "use-multilingual-v3"


_server = module_fixture(running)


_reset = reset_fixture()


def stats(server: str) -> dict:
    return httpx.get(f"{server}/stats").json()


def config(server: str, **kw: object) -> DenseConfig:
    base = dict(provider="openai", model=MODEL, url=f"{server}/v1/embeddings", batch_size=3, retries=2,
                backoff_seconds=0.2, timeout_seconds=5.0)
    base.update(kw)
    return DenseConfig(**base)  # type: ignore[arg-type]


TEXTS = ["密钥轮换的步骤", "重放攻击如何防护", "慢查询日志在哪里", "备份到 S3", "内存配额",
         "请求头过大", "Lightning 导入数据"]


def test_batches_and_order_and_vectors(server: str) -> None:
    got = OpenAIEmbedder(config(server)).embed_passages(TEXTS)
    assert stats(server)["batches"] == [3, 3, 1]
    assert got.shape == (7, 512) and got.dtype == np.float32
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    local = LocalEmbedder(DenseConfig(provider="local", model=MODEL)).embed_passages(TEXTS)
    # The server answers data[] in reverse order: the client must sort by index.
    assert np.min(np.sum(got * local, axis=1)) > 0.999


def test_api_key_is_a_bearer_token_and_never_in_messages(server: str) -> None:
    key = "sk-kbgate-test-5f2a9c"
    cfg = config(server, api_key=ApiKey(key))
    OpenAIEmbedder(cfg).embed_passages(TEXTS[:1])
    assert stats(server)["authorization"] == [f"Bearer {key}"]
    control(server, fail=1, status=401)
    with pytest.raises(EmbeddingResponseError) as err:
        OpenAIEmbedder(cfg).embed_passages(TEXTS[:1])
    assert err.value.reason == "http_401"
    assert key not in str(err.value) and key not in repr(cfg) and key not in str(cfg.api_key)


def test_retries_with_exponential_backoff_then_succeeds(server: str) -> None:
    waits: list[float] = []
    control(server, fail=2, status=503)
    got = OpenAIEmbedder(config(server), sleep=waits.append).embed_passages(TEXTS[:2])
    assert got.shape == (2, 512)
    assert stats(server)["requests"] == 3
    # equal jitter: attempt i waits between half and all of backoff * 2^i
    assert 0.1 <= waits[0] <= 0.2 and 0.2 <= waits[1] <= 0.4


def test_retry_after_is_honoured(server: str) -> None:
    waits: list[float] = []
    control(server, fail=1, status=429, retry_after=1.5)
    OpenAIEmbedder(config(server), sleep=waits.append).embed_passages(TEXTS[:1])
    assert waits == [1.5]


def test_retries_exhausted(server: str) -> None:
    control(server, fail=10, status=502)
    with pytest.raises(EmbeddingUnavailable) as err:
        OpenAIEmbedder(config(server), sleep=lambda s: None).embed_passages(TEXTS[:1])
    assert err.value.reason == "http_502" and err.value.retryable
    assert stats(server)["requests"] == 3  # 1 + retries


def test_client_errors_are_not_retried(server: str) -> None:
    control(server, fail=1, status=400)
    with pytest.raises(EmbeddingResponseError):
        OpenAIEmbedder(config(server), sleep=lambda s: None).embed_passages(TEXTS[:1])
    assert stats(server)["requests"] == 1


def test_wrong_number_of_vectors_is_refused(server: str) -> None:
    control(server, wrong_count=True)
    with pytest.raises(EmbeddingResponseError) as err:
        OpenAIEmbedder(config(server)).embed_passages(TEXTS[:3])
    assert err.value.reason == "bad_count"


# What a loaded machine (a load of 8 on 2 cores) may add to a deadline, in seconds; a slow
# server answers later still, so waiting for it is never mistaken for the deadline.
SLACK, SLOW = 1.5, 4.0


def test_query_timeout_on_a_slow_server(server: str) -> None:
    control(server, delay=SLOW)
    t0 = time.monotonic()
    with pytest.raises(EmbeddingUnavailable) as err:
        OpenAIEmbedder(config(server)).embed_query("密钥", timeout=0.15)
    assert err.value.reason == "timeout"
    assert time.monotonic() - t0 < 0.15 + SLACK < SLOW


def test_server_down_fails_fast() -> None:
    down = f"http://127.0.0.1:{free_port()}"
    t0 = time.monotonic()
    with pytest.raises(EmbeddingUnavailable) as err:
        OpenAIEmbedder(config(down)).embed_query("密钥", timeout=10.0)
    assert err.value.reason == "connect"
    assert time.monotonic() - t0 < 10.0 / 2  # refused at once, not given up at the timeout


class ManualClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_deadline_breaker_and_recovery(server: str) -> None:
    embedder = OpenAIEmbedder(config(server))
    embedder.embed_passages(["连接"])  # the connection is open: timings below are the server's
    clock = ManualClock()  # the breaker's clock; deadlines run on real time
    breaker = Breaker(failures=2, reset_seconds=30.0, clock=clock)
    encoder = QueryEncoder(embedder, deadline_ms=1000, breaker=breaker)
    try:
        ok = encoder.wait(encoder.start("密钥轮换"))
        assert ok.vector is not None and ok.reason is None
        control(server, delay=SLOW)
        for q in ("慢一", "慢二"):
            t0 = time.monotonic()
            out = encoder.wait(encoder.start(q))
            assert out.vector is None and out.reason == "timeout"
            assert time.monotonic() - t0 < 1.0 + SLACK < SLOW  # the deadline, not the server's answer
        # Each call gave up at its deadline and counted a failure: two open the breaker.
        until(lambda: breaker.state == "open", within=30, what="the breaker opens")
        before = stats(server)["requests"]
        out = encoder.wait(encoder.start("断路"))
        assert out.vector is None and out.reason == "breaker_open"
        assert stats(server)["requests"] == before  # no call while open
        # A cached query is still answered from the LRU, breaker or not.
        assert encoder.wait(encoder.start("密钥轮换")).vector is not None
        control(server, delay=0.0)
        clock.t += 30.0
        assert breaker.state == "half-open"  # one trial call, which succeeds and closes it
        assert encoder.wait(encoder.start("恢复")).vector is not None
        assert breaker.state == "closed"
    finally:
        encoder.close()


DOCS = HYBRID_DOCS


def test_hybrid_index_falls_back_to_lexical_when_the_provider_is_down_or_slow(server: str, tmp_path: Path) -> None:
    deadline, server_delay = 0.5, 2.0  # seconds: the configured query deadline, the slow server's answer
    cfg = config(server, query_timeout_ms=int(deadline * 1000), breaker_failures=3, breaker_reset_seconds=60)
    writer = HybridStore(tmp_path, dense={"docs": cfg}).create_or_open_for_write("docs")
    writer.ingest(DOCS, progress=False)
    assert isinstance(writer, HybridIndex) and writer.last_dense_report is not None
    assert writer.last_dense_report.embedded == len(DOCS)
    lexical = IndexStore(tmp_path).open("docs")
    hybrid = HybridStore(tmp_path, dense={"docs": cfg}).open("docs")
    assert isinstance(hybrid, HybridIndex)
    query = "备份 数据"
    try:
        assert hybrid.search(PARAPHRASE, 3)[0].doc_id == "pw"
        assert hybrid.dense.counters == {"hybrid": 1}
        control(server, delay=server_delay)  # slow: every query must still answer at its deadline
        for i in range(3):
            t0 = time.monotonic()
            hits = hybrid.search(f"{query} {i}", 3)
            # the deadline with a second of slack for a loaded machine, and never the server's answer
            assert time.monotonic() - t0 < deadline + 1.0 < server_delay
            assert [h.doc_id for h in hits] == [h.doc_id for h in lexical.search(f"{query} {i}", 3)]
        assert hybrid.dense.counters.get("fallback:timeout") == 3
        # The late answers land, each a failure: three open the breaker.
        until(lambda: hybrid.dense.encoder.breaker.state == "open", within=30, what="the breaker opens")
        calls = stats(server)["requests"]
        hits = hybrid.search("慢日志 语句", 3)
        assert hits[0].doc_id == "slow"
        # No wait at all while open: no call was made, so nothing was waited for.
        assert stats(server)["requests"] == calls
        assert hybrid.dense.counters.get("fallback:breaker_open") == 1
    finally:
        hybrid.close()  # type: ignore[attr-defined]


def test_ingest_fails_whole_when_the_provider_stays_down(tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    cfg = DenseConfig(provider="openai", model=MODEL, url=down, retries=1, backoff_seconds=0.0)
    store = HybridStore(tmp_path, dense={"docs": cfg})
    with pytest.raises(EmbeddingUnavailable):
        store.create_or_open_for_write("docs").ingest(DOCS, progress=False)
    # Nothing was committed: the Tantivy side rolled back with the vectors.
    assert IndexStore(tmp_path).open("docs").stats().documents == 0


def test_the_local_e5_model_embeds_queries_and_passages() -> None:
    e5 = LocalEmbedder(DenseConfig(provider="local", model="multilingual-e5-small-q4"))
    passages = e5.embed_passages(["使用 BR 工具把全量数据备份到 S3。", "慢日志记录执行时间超过阈值的语句。"])
    query = e5.embed_query("怎么备份数据", timeout=10.0)
    assert passages.shape == (2, 384) and query.shape == (384,)
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert float(passages[0] @ query) > float(passages[1] @ query)


def test_a_cold_start_never_opens_the_breaker_and_a_warmed_encoder_counts_again(server: str) -> None:
    embedder = OpenAIEmbedder(config(server))
    embedder.embed_passages(["连接"])  # the connection is open: timings below are the server's
    control(server, delay=1.0)  # the model is still loading: every answer comes late
    breaker = Breaker(failures=2, reset_seconds=60.0)
    encoder = QueryEncoder(embedder, deadline_ms=200, breaker=breaker)
    try:
        encoder.warm()
        assert not encoder.warmed
        pending = [encoder.start(q) for q in ("冷启动一", "冷启动二", "冷启动三")]
        assert [encoder.wait(p).reason for p in pending] == ["timeout"] * 3
        # each call gives up at its deadline (the provider's own timeout): done, a failure each
        assert not wait([p.future for p in pending if p.future is not None], timeout=10.0).not_done
        until(lambda: encoder.warmed, within=30, what="the encoder is warmed")
        assert encoder.warm_error is None
        assert breaker.state == "closed"  # three late answers, none counted: still closed
        control(server, delay=0.0)
        assert encoder.wait(encoder.start("热身之后")).vector is not None
        control(server, delay=1.0)  # warmed: late answers count again, and two open it
        late = [encoder.start(q) for q in ("慢一", "慢二")]
        assert [encoder.wait(p).reason for p in late] == ["timeout"] * 2
        assert not wait([p.future for p in late if p.future is not None], timeout=10.0).not_done
        assert breaker.state == "open"
    finally:
        encoder.close()


def test_a_hybrid_index_is_not_ready_until_its_model_has_answered_once(server: str, tmp_path: Path) -> None:
    cfg = config(server, query_timeout_ms=300)
    HybridStore(tmp_path, dense={"docs": cfg}).create_or_open_for_write("docs").ingest(DOCS, progress=False)
    control(server, delay=1.5)
    hybrid = HybridStore(tmp_path, dense={"docs": cfg}).open("docs")
    assert isinstance(hybrid, HybridIndex)
    try:
        assert not hybrid.model_ready and IndexStore(tmp_path).open("docs").model_ready
        until(lambda: hybrid.model_ready, within=30, what="the model answered once")
        control(server, delay=0.0)
        assert hybrid.search(PARAPHRASE, 3)[0].doc_id == "pw"
        assert hybrid.dense.counters == {"hybrid": 1}
    finally:
        hybrid.close()  # type: ignore[attr-defined]
