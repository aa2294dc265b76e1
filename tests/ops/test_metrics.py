"""gateway/ops/metrics.py: /metrics parsed with the Prometheus text parser; counts equal requests.

In-process (own registry) and through a real `kbgate serve` with two hypercorn workers
sharing a real Redis and a PROMETHEUS_MULTIPROC_DIR: whichever worker answers the scrape
reports the sum of both.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgi_lifespan import LifespanManager
from prometheus_client.parser import text_string_to_metric_families

from gateway.core.config import load_config
from gateway.core.events import AnswerLooked, HybridSearched
from gateway.ops.metrics import Metrics
from gateway.serve.app import create_app
from indexes.store import IndexStore
from tests.support.callbacks import body, signed
from tests.support.configs import ENV, SECRET_ACME, SECRET_ACME_OLD, SECRETS, two_tenants
from tests.support.documents import KB_DOCS
from tests.support.harness import free_port, serve


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """{(sample name, sorted labels): value} of a Prometheus text exposition."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def val(m: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return m.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture(name="client")
async def _client(tmp_path: Path, docs_index: Path,
                  monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    app = create_app(load_config(two_tenants(tmp_path, docs_index)))
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        yield httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate")


@pytest.mark.anyio
async def test_counts_match_requests_in_process(client: httpx.AsyncClient, docs_index: Path) -> None:
    def post(tenant: str, secret: str | None, **kw: Any) -> Any:
        raw = body(**kw)
        headers = signed(secret, raw) if secret else {"content-type": "application/json"}
        return client.post(f"/volcengine/{tenant}", content=raw, headers=headers)

    for _ in range(3):
        assert (await post("acme", SECRET_ACME)).status_code == 200
    assert (await post("acme", SECRET_ACME_OLD)).status_code == 200
    assert (await post("acme", "not-a-key-of-acme")).status_code == 401
    assert (await post("acme", None)).status_code == 400  # headers missing, enforce
    assert (await post("beta", None, first="产品", second="文档")).status_code == 200  # report mode: unsigned
    r = await client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    m = samples(r.text)
    assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="ok") == 4
    assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="signature_mismatch") == 1
    assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="header_missing") == 1
    assert val(m, "kbgate_callbacks_total", tenant="beta", outcome="ok") == 1
    assert val(m, "kbgate_callback_signatures_total", tenant="beta", signature="unsigned") == 1
    assert val(m, "kbgate_key_verifications_total", tenant="acme", key_id="acme-2026-11") == 3
    assert val(m, "kbgate_key_verifications_total", tenant="acme", key_id="acme-2026-10") == 1
    assert val(m, "kbgate_callback_duration_seconds_count", tenant="acme") == 6
    assert val(m, "kbgate_search_duration_seconds_count", tenant="acme") == 4
    assert val(m, "kbgate_callback_results_count", tenant="acme") == 4
    assert val(m, "kbgate_callback_results_sum", tenant="acme") >= 4
    assert val(m, "kbgate_nonce_store_errors_total", tenant="acme") == 0
    # the same question five times through routes of the same filter: searched once (answer cache on by default)
    assert val(m, "kbgate_answer_cache_lookups_total", index="kb", outcome="miss") == 1
    assert val(m, "kbgate_answer_cache_lookups_total", index="kb", outcome="hit") == 4
    assert val(m, "kbgate_index_up", index="kb") == 1
    assert val(m, "kbgate_index_documents", index="kb") == len(KB_DOCS)
    committed = IndexStore(docs_index).open("kb").stats().last_commit  # the session's index, built once
    assert committed is not None and val(m, "kbgate_index_last_commit_timestamp_seconds", index="kb") == committed
    commit = IndexStore(docs_index).open("kb").commit  # the label replicas are compared by
    assert val(m, "kbgate_index_commit_info", index="kb", commit=commit) == 1
    assert not any(s in r.text for s in SECRETS) and "密钥轮换" not in r.text


@pytest.mark.anyio
async def test_nonce_store_errors_counted(tmp_path: Path, docs_index: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    cfg = load_config(two_tenants(tmp_path, docs_index, redis_url=f"redis://127.0.0.1:{free_port()}/0"))
    app = create_app(cfg)
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate")
        raw = body()
        assert (await c.post("/volcengine/acme", content=raw, headers=signed(SECRET_ACME, raw))).status_code == 503
        got = samples((await c.get("/metrics")).text)
    assert val(got, "kbgate_nonce_store_errors_total", tenant="acme") == 1
    assert val(got, "kbgate_callbacks_total", tenant="acme", outcome="replay_store_unavailable") == 1


def test_two_workers_counts_match_requests(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = two_tenants(tmp_path, docs_index, redis_url=redis_url, key_prefix=key_prefix, workers=2)
    prom = tmp_path / "prom"
    prom.mkdir()
    (prom / "counter_999999.db").write_bytes(b"stale from an earlier run")  # serve must wipe it
    sent_ok, sent_bad = 40, 8

    def one(i: int) -> int:
        raw = body()
        secret = SECRET_ACME if i < sent_ok else "a-wrong-secret-value"
        # A fresh connection per request lets both workers accept some of them.
        r = httpx.post(srv.url + "/volcengine/acme", content=raw, headers=signed(secret, raw), timeout=10)
        return r.status_code

    with serve(cfg, workers=2, env={**ENV, "PROMETHEUS_MULTIPROC_DIR": str(prom)}) as srv:
        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(one, range(sent_ok + sent_bad)))
        assert codes == [200] * sent_ok + [401] * sent_bad
        for _ in range(8):  # every scrape, whichever worker answers, sees both workers' counts
            m = samples(httpx.get(srv.url + "/metrics", timeout=10).text)
            assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="ok") == sent_ok
            assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="signature_mismatch") == sent_bad
            assert val(m, "kbgate_key_verifications_total", tenant="acme", key_id="acme-2026-11") == sent_ok
            assert val(m, "kbgate_callback_duration_seconds_count", tenant="acme") == sent_ok + sent_bad
            assert val(m, "kbgate_index_documents", index="kb") == len(KB_DOCS)
        writers = {f.stem.rsplit("_", 1)[-1] for f in prom.glob("counter_*.db")}
        assert "999999" not in writers
        assert len(writers) == 2, f"callbacks did not reach both workers: {writers}"


def test_serve_makes_and_removes_its_own_metrics_dir(tmp_path: Path, docs_index: Path) -> None:
    cfg = two_tenants(tmp_path, docs_index)
    tmp = tmp_path / "tmp"  # the server's own TMPDIR: other runs on this machine cannot interfere
    tmp.mkdir()
    with serve(cfg, env={**ENV, "TMPDIR": str(tmp)}) as srv:
        during = set(tmp.glob("kbgate-metrics-*"))
        raw = body()
        r = httpx.post(srv.url + "/volcengine/acme", content=raw, headers=signed(SECRET_ACME, raw))
        assert r.status_code == 200
        m = samples(httpx.get(srv.url + "/metrics").text)
        assert val(m, "kbgate_callbacks_total", tenant="acme", outcome="ok") == 1
        assert len(during) == 1 and any(p.suffix == ".db" for p in next(iter(during)).iterdir())
    assert not next(iter(during)).exists()


def test_a_killed_servers_metrics_dir_is_removed_by_the_next_start(tmp_path: Path, docs_index: Path) -> None:
    cfg = two_tenants(tmp_path, docs_index)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**ENV, "TMPDIR": str(tmp)}
    killed = serve(cfg, env=env).start()
    [left] = tmp.glob("kbgate-metrics-*")
    assert killed.proc is not None
    os.killpg(killed.proc.pid, signal.SIGKILL)  # what kill -9 of the group or the OOM killer does
    killed.proc.wait(10)
    killed.stop()
    assert left.exists()  # nothing could remove it
    with serve(cfg, env=env):
        assert not left.exists()
        assert len(list(tmp.glob("kbgate-metrics-*"))) == 1  # its own
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize(("observe", "event", "metric", "outcomes"), [
    ("observe_hybrid", HybridSearched, "kbgate_hybrid_searches_total",
     ("hybrid", "hybrid", "timeout", "breaker_open", "stale")),
    ("observe_answer", AnswerLooked, "kbgate_answer_cache_lookups_total", ("miss", "hit", "hit"))])
def test_search_outcomes_are_counted_per_index(monkeypatch: pytest.MonkeyPatch, observe: str, event: Any,
                                               metric: str, outcomes: tuple[str, ...]) -> None:
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR", raising=False)
    metrics = Metrics(lambda: [])
    for outcome in outcomes:
        getattr(metrics, observe)(event("docs", outcome))
    getattr(metrics, observe)(event("kb", "error"))
    m = samples(metrics.exposition().decode())
    assert {o: val(m, metric, index="docs", outcome=o) for o in outcomes} == {o: outcomes.count(o) for o in outcomes}
    assert val(m, metric, index="kb", outcome="error") == 1


def test_multiprocess_updates_do_not_ask_the_os_for_the_pid_each_time(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from prometheus_client import values

    monkeypatch.setattr(values, "ValueClass", values.ValueClass)  # restored after the test
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    metrics = Metrics(lambda: [])
    calls = 0
    real = os.getpid

    def counted() -> int:
        nonlocal calls
        calls += 1
        return real()

    monkeypatch.setattr(os, "getpid", counted)
    for _ in range(50):
        metrics.observe_answer(AnswerLooked("docs", "hit"))
    assert calls == 0  # prometheus-client's default asks on every update
    monkeypatch.setattr(os, "getpid", real)
    m = samples(metrics.exposition().decode())
    assert val(m, "kbgate_answer_cache_lookups_total", index="docs", outcome="hit") == 50
    assert any(p.name.startswith("counter_") and str(real()) in p.name for p in tmp_path.iterdir())
