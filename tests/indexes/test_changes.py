"""indexes.changes: change sets applied in one commit, all or nothing, idempotent by id and
content hash, waiting for the one writer; real Tantivy indexes in tmp_path."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from indexes.changes import apply_changes, document_head
from indexes.errors import IndexLockedError
from indexes.records import document_revision
from indexes.stats import read_generation
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import ChangeSet, Section
from indexes.writer import open_writer
from tests.support.documents import one_section

_doc = one_section


@pytest.fixture(name="index")
def _index(store: IndexStore) -> KnowledgeIndex:
    ki = store.create_or_open_for_write("kb")
    ki.ingest([_doc("a", "苹果是一种水果。", dataset="ds1"), _doc("b", "香蕉是一种黄色的水果。", source="/src/b.md")],
              progress=False)
    return ki


def test_upserts_and_deletes_land_in_one_commit(store: IndexStore, index: KnowledgeIndex) -> None:
    before = read_generation(index.path)
    new = _doc("c", "葡萄是紫色的。")
    changed = _doc("a", "苹果是红色的水果。", dataset="ds1")
    report = apply_changes(index, ChangeSet(upserts=(new, changed), deletes=("b", "zz")))
    assert [(c.doc_id, c.change) for c in report.changes] == [
        ("c", "added"), ("a", "updated"), ("b", "deleted"), ("zz", "absent")]
    assert report.changes[0].revision == document_revision(new) and report.changes[2].revision is None
    assert report.commit is not None and report.commit > (before or 0)
    assert report.generation == report.commit == read_generation(index.path)
    assert report.applied_at is not None and not report.refused
    reader = store.open("kb")
    reader.maybe_reload(force=True)
    assert sorted(reader.revisions()) == ["a", "c"]
    assert [h.doc_id for h in reader.search("葡萄", 5)] == ["c"]


def test_a_retry_changes_nothing_and_makes_no_commit(index: KnowledgeIndex) -> None:
    changes = ChangeSet(upserts=(_doc("c", "葡萄是紫色的。"),), deletes=("b",))
    first = apply_changes(index, changes)
    again = apply_changes(index, changes)
    assert [c.change for c in again.changes] == ["unchanged", "absent"]
    assert again.commit is None and again.generation == first.commit == read_generation(index.path)


def test_one_refused_document_refuses_the_whole_set(store: IndexStore, index: KnowledgeIndex) -> None:
    before = read_generation(index.path)
    other_dataset = _doc("a", "苹果。", dataset="ds2")  # 'a' is a document of ds1
    other_source = _doc("b", "香蕉。", source="document-api")  # 'b' was indexed from /src/b.md
    report = apply_changes(index, ChangeSet(upserts=(_doc("new", "新的文档。"), other_dataset, other_source)))
    assert {(r.doc_id, r.kind) for r in report.refused} == {("a", "dataset"), ("b", "source")}
    assert all(r.reason for r in report.refused)
    assert report.commit is None and not report.changes
    assert read_generation(index.path) == before
    reader = store.open("kb")
    reader.maybe_reload(force=True)
    assert sorted(reader.revisions()) == ["a", "b"]  # 'new' was not written either


def test_replace_takes_over_another_source(index: KnowledgeIndex) -> None:
    report = apply_changes(index, ChangeSet(upserts=(_doc("b", "香蕉。", source="document-api"),), replace=True))
    assert [c.change for c in report.changes] == ["updated"] and report.commit is not None


def test_a_delete_outside_the_datasets_allowed_refuses_the_set(index: KnowledgeIndex) -> None:
    report = apply_changes(index, ChangeSet(upserts=(_doc("c", "葡萄。", dataset="ds2"),), deletes=("a",),
                                            datasets=("ds2",)))
    assert [(r.doc_id, r.kind) for r in report.refused] == [("a", "dataset")] and report.commit is None
    assert "a" in index.revisions()


def test_an_id_twice_in_one_set_is_refused_before_any_write() -> None:
    with pytest.raises(ValueError, match="more than once"):
        ChangeSet(upserts=(_doc("a", "x"),), deletes=("a",))


def test_waits_for_the_writer_another_holds(index: KnowledgeIndex) -> None:
    held = open_writer(index._index, "kb", str(index.path))  # as `kbgate index add` holds it
    released = threading.Event()

    def release() -> None:
        time.sleep(0.4)
        held.rollback()
        held.wait_merging_threads()
        released.set()

    with pytest.raises(IndexLockedError):
        apply_changes(index, ChangeSet(upserts=(_doc("c", "葡萄。"),)), wait_seconds=0.1)
    t = threading.Thread(target=release)
    t.start()
    report = apply_changes(index, ChangeSet(upserts=(_doc("c", "葡萄。"),)), wait_seconds=10)
    t.join()
    assert released.is_set() and [c.change for c in report.changes] == ["added"]


def test_decides_on_the_latest_commit_not_a_stale_reader(store: IndexStore, index: KnowledgeIndex) -> None:
    """Another handle (another worker, another process) commits after this handle's reader
    loaded: the write must see that commit, not undo it as 'unchanged'."""
    stale = store.create_or_open_for_write("kb")
    v1 = _doc("c", "第一版。")
    apply_changes(stale, ChangeSet(upserts=(v1,)))
    apply_changes(index, ChangeSet(upserts=(replace(v1, sections=(Section("", "第二版。"),)),)))
    report = apply_changes(stale, ChangeSet(upserts=(v1,)))
    assert [c.change for c in report.changes] == ["updated"]


def test_document_head_reports_when_a_revision_was_applied(store: IndexStore, index: KnowledgeIndex) -> None:
    doc = _doc("c", "葡萄。")
    report = apply_changes(index, ChangeSet(upserts=(doc,)), now=lambda: 1_800_000_000.0)
    reader = store.open("kb")
    reader.maybe_reload(force=True)
    head = document_head(reader, "c")
    assert head is not None and head.head.revision == document_revision(doc)
    assert (head.applied_commit, head.applied_at) == (report.commit, 1_800_000_000.0)
    b = document_head(reader, "b")  # written by an ingest, not a change set: no time
    assert b is not None and b.applied_at is None and b.head.source == "/src/b.md"
    assert document_head(reader, "zz") is None
