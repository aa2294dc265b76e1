"""indexes/milvus against a real Milvus Lite server (the session's `milvus`): the same pages in
a Tantivy folder and in a collection give the same hits, relevance and Summaries; scope rules
hold on Milvus exactly (globs within a segment, excluded trees in any case, hidden documents,
datasets); the writer skips unchanged revisions, refuses what the Tantivy writer refuses, keeps
the document frequencies in step with updates and deletes, and raises the generation by one per
committed change; a Milvus that does not answer raises IndexUnavailableError within its timeout."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from indexes.errors import IndexUnavailableError
from indexes.milvus import MilvusIndex
from indexes.store import IndexStore
from indexes.types import ChangeSet, Document, MilvusConfig, SearchFilter, Section
from tests.support.documents import AGENT_DOCS, HYBRID_DOCS, KB_DOCS
from tests.support.harness import free_port
from tests.support.milvus_server import MilvusLite

QUESTIONS = ("密钥轮换", "重放攻击怎么防护", "部署时密钥放在哪里", "运维手册 索引重建", "软件安装", "今天天气怎么样",
             "备份到 S3", "集群扩容 节点")


@pytest.fixture(name="stores")
def _stores(milvus: MilvusLite, tmp_path: Path) -> tuple[IndexStore, IndexStore]:
    """(a Tantivy store, a store whose index 'kb' lives in a fresh collection), both holding the
    suite's pages."""
    docs = [*AGENT_DOCS, *KB_DOCS, *HYBRID_DOCS]
    tantivy = IndexStore(tmp_path / "t")
    tantivy.create_or_open_for_write("kb").ingest(docs, progress=False)
    remote = IndexStore(tmp_path / "m", remote={"kb": MilvusConfig(milvus.uri, f"t_{uuid.uuid4().hex[:12]}")})
    report = remote.create_or_open_for_write("kb").ingest(docs, progress=False)
    assert report.added == len(docs) and report.commit == 1
    return tantivy, remote


def test_the_same_pages_answer_the_same_on_both_backends(stores: tuple[IndexStore, IndexStore]) -> None:
    t, m = (s.open("kb") for s in stores)
    for q in QUESTIONS:
        a, b = t.search(q, 5), m.search(q, 5)
        # The ranking is Milvus's BM25 per field, fused here: pages tied on Tantivy may swap places,
        # but Milvus's best page is among Tantivy's best five and the best relevance is the same.
        assert [h.doc_id for h in b][:1] == [h.doc_id for h in a if h.doc_id == b[0].doc_id][:1], q
        assert max((h.relevance for h in b), default=0) == pytest.approx(max((h.relevance for h in a), default=0),
                                                                          abs=1e-9), q
        mine = {h.doc_id: h for h in b}
        for x in a:  # the same relevance and Summary wherever the same page is found
            y = mine.get(x.doc_id)
            if y is not None:
                assert y.relevance == pytest.approx(x.relevance, abs=1e-9), (q, x.doc_id)
                assert (y.summary, y.title, y.url, y.publish_time, y.cover_image, y.content) == (
                    x.summary, x.title, x.url, x.publish_time, x.cover_image, x.content), (q, x.doc_id)
    assert m.search("今天天气怎么样", 5, floor=0.3) == t.search("今天天气怎么样", 5, floor=0.3) == []
    near = [(h.chunk, h.content) for h in t.with_neighbours(t.search("第17节", 1), 2, 1500)]
    assert [(h.chunk, h.content) for h in m.with_neighbours(m.search("第17节", 1), 2, 1500)] == near
    assert near[0][0] > 0 and near[0][1].count("运维手册说明") > 1  # its chunk and its neighbours
    assert m.get_document("kb-2") == t.get_document("kb-2")
    assert m.doc_id_at("guide/replay.md", ("internal",)) == "guide/replay.md"
    assert m.revisions() == t.revisions() and m.stats().documents == t.stats().documents
    assert m.question("密钥轮换怎么做").total == pytest.approx(t.question("密钥轮换怎么做").total)


def test_scope_rules_hold_exactly(stores: tuple[IndexStore, IndexStore]) -> None:
    m = stores[1].open("kb")

    def found(flt: SearchFilter) -> set[str]:
        return {h.doc_id for h in m.search("密钥轮换", 20, filter=flt)}

    everything = found(SearchFilter())
    assert "guide/hidden.md" not in everything and "config/secrets.md" in everything
    assert "guide/hidden.md" in found(SearchFilter(include_hidden=True))
    assert found(SearchFilter(exclude_path_globs=("CONFIG/**", "state/**"))) == everything - {
        "config/secrets.md", "state/manifest.md"}
    assert found(SearchFilter(path_globs=("guide/*",))) == {"guide/key-rotation.md"}
    assert found(SearchFilter(path_globs=("*",))) == {"kb-1"}  # no path; "*" stays inside one segment
    assert found(SearchFilter(datasets=("internal",))) == set()
    assert found(SearchFilter(datasets=())) == set()


def test_writes_skip_refuse_and_count_generations(stores: tuple[IndexStore, IndexStore]) -> None:
    store = stores[1]
    w, served = store.create_or_open_for_write("kb"), store.open("kb")
    assert w.ingest([*KB_DOCS], progress=False).commit is None  # unchanged: no commit
    served.maybe_reload(force=True)
    assert served.generation == 1
    assert served.question("轮换").units[0].domain > 0
    before = served.question("退役").units[0]
    changed = Document("kb-1", "密钥轮换", (Section("", "旧密钥直接删除。"),), dataset="kb")
    assert w.apply(ChangeSet(upserts=(changed,))).changes == {"kb-1": "updated"}
    other = Document("kb-2", "别的", (Section("", "另一个数据集"),), dataset="public")
    refused = w.apply(ChangeSet(upserts=(other,), deletes=("kb-3",)))
    assert refused.refused == {"kb-2": "dataset"} and refused.commit is None and refused.changes == {}
    served.maybe_reload(force=True)
    assert served.generation == 2 and "kb-3" in served.revisions()
    after = served.question("退役").units[0]  # kb-1 no longer holds 退役: one document fewer
    assert after.domain < before.domain
    assert w.apply(ChangeSet(deletes=("kb-1", "nope"))).changes == {"kb-1": "deleted", "nope": "absent"}
    served.maybe_reload(force=True)
    assert served.generation == 3 and served.get_document("kb-1") is None
    assert "kb-1" not in {h.doc_id for h in served.search("旧密钥直接删除", 5)}


def test_a_milvus_that_does_not_answer_is_unavailable_within_its_timeout(tmp_path: Path) -> None:
    idx = MilvusIndex("kb", MilvusConfig(f"http://127.0.0.1:{free_port()}", "nothing", timeout_seconds=0.5),
                      tmp_path)
    with pytest.raises(IndexUnavailableError) as exc:
        idx.search("密钥轮换", 5)
    assert exc.value.reason == "unreachable" and "密钥" not in str(exc.value)


@pytest.fixture(name="hand", scope="module")
def _hand(milvus: MilvusLite, tmp_path_factory: pytest.TempPathFactory) -> MilvusIndex:
    from tests.indexes.test_metadata import HAND

    config = MilvusConfig(milvus.uri, f"h_{uuid.uuid4().hex[:12]}")
    store = IndexStore(tmp_path_factory.mktemp("hand"), remote={"m": config})
    store.create_or_open_for_write("m").ingest(HAND, progress=False)
    idx = store.open("m")
    assert isinstance(idx, MilvusIndex)
    return idx


def test_every_metadata_operator_means_on_milvus_what_it_means_on_tantivy(hand: MilvusIndex) -> None:
    from indexes.types import MetaFilter
    from tests.indexes.test_metadata import CASES, QUERY

    got = [({h.doc_id for h in hand.search(QUERY, 100, where=MetaFilter("and", (cond,)))}, want)
           for cond, want in CASES]
    assert [g for g, _ in got] == [w for _, w in got]
    both = MetaFilter("or", tuple(c for c, _ in CASES[:2]))
    assert {h.doc_id for h in hand.search(QUERY, 100, where=both)} == {"guide/a.md", "ops/b.md"}
