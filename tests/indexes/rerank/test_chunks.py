"""The rerank stage on a real index, against the real rerank server in "reverse" mode (the last
candidate sent scores highest, so a reranked answer comes in the reverse of the order before):
lexical and hybrid chunk orders are reranked before the one-per-document collapse, the hits
carry scores.rerank and relevance, chunks past `candidates` follow, and with the server slow or
down the order before is kept and the answer is not marked reusable."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from indexes.dense.config import DenseConfig
from indexes.dense.index import HybridStore
from indexes.rerank import RerankConfig
from indexes.types import Document, Section
from tests.support.harness import free_port
from tests.support.local_server import module_fixture, reset
from tests.support.rerank_server import PATHS, running

# The deadlines below are not what these tests check (the slow and down cases set their own):
# they are long enough for the first query to wait out the model's load, and a rerank call to
# answer, on a loaded machine (a load of 8 on 2 cores).
USE = DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=120_000)
RERANK_TIMEOUT_MS = 60_000
# Five documents that all match 备份, each more often than the next: BM25 ranks d0 first.
DOCS = [Document(f"d{i}", f"第{i}篇", (Section("", "备份 " * (6 - i) + "其他内容" * (i + 1)),)) for i in range(5)]


_server = module_fixture(running)


@pytest.fixture(autouse=True)
def _reverse(server: str) -> None:
    reset(server, mode="reverse")


def store(root: Path, server: str, *, hybrid: bool = False, **kw: object) -> HybridStore:
    kw.setdefault("timeout_ms", RERANK_TIMEOUT_MS)
    rerank = RerankConfig(provider="cohere", url=server + PATHS["cohere"], model="m", **kw)  # type: ignore[arg-type]
    dense = {"kb": USE} if hybrid else None
    HybridStore(root, dense=dense).create_or_open_for_write("kb").ingest(DOCS, progress=False)
    return HybridStore(root, dense=dense, rerank={"kb": rerank})


def ids(hits: list) -> list[str]:
    return [h.doc_id for h in hits]


def test_lexical_order_is_reranked_before_the_collapse(tmp_path: Path, server: str) -> None:
    plain = HybridStore(tmp_path / "plain")
    plain.create_or_open_for_write("kb").ingest(DOCS, progress=False)
    before = ids(plain.open("kb").search("备份", 5))
    assert before == ["d0", "d1", "d2", "d3", "d4"]
    idx = store(tmp_path / "rr", server).open("kb")
    assert idx.search_may_wait
    hits, generation = idx.answer("备份", 5)
    assert ids(hits) == before[::-1]
    assert generation is not None  # a reranked answer may be reused
    assert [h.scores.rerank for h in hits] == pytest.approx([5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])
    assert [h.relevance for h in hits] == [h.scores.rerank for h in hits]
    sent = httpx.get(f"{server}/stats").json()["bodies"][0]
    assert sent["query"] == "备份" and sent["documents"][0].startswith("第0篇\n备份")  # title, then the chunk


def test_only_the_first_candidates_are_reranked(tmp_path: Path, server: str) -> None:
    idx = store(tmp_path, server, candidates=3).open("kb")
    hits = idx.search("备份", 5)
    assert ids(hits) == ["d2", "d1", "d0", "d3", "d4"]  # three reranked, then the lexical order
    # past the candidates: lexical relevance, capped at the lowest reranked one (order stays monotonic)
    assert hits[3].scores.rerank is None and hits[3].scores.bm25 is not None
    assert 0.0 < hits[3].relevance <= min(h.relevance for h in hits[:3])
    assert httpx.get(f"{server}/stats").json()["documents"] == [3]


def test_hybrid_fused_order_is_reranked(tmp_path: Path, server: str) -> None:
    s = store(tmp_path, server, hybrid=True)
    idx = s.open("kb")
    assert ids(idx.search("备份", 5)) == ["d4", "d3", "d2", "d1", "d0"]
    assert idx.dense.counters.get("hybrid") == 1  # the fused path ran, then the rerank
    s.close()


def test_reranker_down_or_slow_keeps_the_order_before_and_is_not_reused(tmp_path: Path, server: str) -> None:
    told: list[str] = []
    root = tmp_path
    HybridStore(root).create_or_open_for_write("kb").ingest(DOCS, progress=False)
    dead = RerankConfig(provider="tei", url=f"http://127.0.0.1:{free_port()}/rerank")
    idx = HybridStore(root, rerank={"kb": dead}, observe_rerank=lambda i, o, ms: told.append(o)).open("kb")
    hits, generation = idx.answer("备份", 5)
    assert ids(hits) == ["d0", "d1", "d2", "d3", "d4"] and generation is None
    assert hits[0].scores.rerank is None
    slow = RerankConfig(provider="cohere", url=server + PATHS["cohere"], model="m", timeout_ms=200)
    httpx.post(f"{server}/control", json={"delay": 1.0}).raise_for_status()
    idx2 = HybridStore(tmp_path, rerank={"kb": slow}, observe_rerank=lambda i, o, ms: told.append(o)).open("kb")
    assert ids(idx2.search("备份", 5)) == ["d0", "d1", "d2", "d3", "d4"]
    assert told == ["error", "timeout"]


def test_a_writer_never_reranks(tmp_path: Path, server: str) -> None:
    s = store(tmp_path, server)
    assert s.create_or_open_for_write("kb").rerank is None
