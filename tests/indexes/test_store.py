"""indexes.store: real Tantivy indexes in tmp_path."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from indexes.errors import IndexCorruptError, IndexLockedError, IndexNotFoundError, SchemaVersionError
from indexes.ingest import read_paths
from indexes.schema import SIDECAR
from indexes.stats import read_generation
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document, IngestError, SearchFilter, Section
from indexes.writer import open_writer
from tests.support.documents import one_section

_doc = one_section


@pytest.fixture(name="index")
def _index(store: IndexStore) -> KnowledgeIndex:
    ki = store.create_or_open_for_write("kb")
    ki.ingest([_doc("a", "苹果是一种水果。"), _doc("b", "香蕉是一种黄色的水果。")], progress=False)
    return ki


def test_names_open_and_stats(store: IndexStore, index: KnowledgeIndex) -> None:
    assert store.names() == ["kb"]
    reader = store.open("kb")
    assert store.open("kb") is reader
    stats = reader.stats()
    assert (stats.documents, stats.chunks) == (2, 2)
    assert stats.generation > 0 and stats.size_bytes > 0
    with pytest.raises(IndexNotFoundError):
        store.open("nope")


def test_upsert_replaces_and_unchanged_is_skipped(store: IndexStore, index: KnowledgeIndex) -> None:
    report = index.ingest([_doc("a", "苹果是一种水果。"), _doc("b", "葡萄是紫色的。")],
                          progress=False)
    assert (report.added, report.updated, report.unchanged) == (0, 1, 1)
    reader = store.open("kb")
    reader.maybe_reload(force=True)
    assert reader.stats().chunks == 2
    assert [h.doc_id for h in reader.search("葡萄", 5)] == ["b"]
    assert reader.search("香蕉", 5) == []


def test_delete_missing(store: IndexStore, index: KnowledgeIndex) -> None:
    report = index.ingest([_doc("a", "苹果是一种水果。")], delete_missing=True, progress=False)
    assert (report.deleted, report.unchanged) == (1, 1)
    assert index.get_document("b") is None and index.get_document("a") is not None


def test_delete_missing_is_skipped_after_an_input_error(index: KnowledgeIndex) -> None:
    report = index.ingest([_doc("a", "苹果是一种水果。"), IngestError("x.md", "bad")],
                          delete_missing=True, progress=False)
    assert report.deleted == 0 and report.errors == [("x.md", "bad")]
    assert report.warnings == [("--delete-missing", "not run because of 1 input error: no document was deleted")]
    assert index.get_document("b") is not None


def test_get_document_reassembles_chunks(store: IndexStore) -> None:
    ki = store.create_or_open_for_write("long", chunk_chars=100)
    sections = (Section("第一节", "".join(f"第{i}句内容在这里。" for i in range(40))),
                Section("第二节", "短的结尾。"))
    doc = Document("d", "长文", sections, url="https://x", publish_time=5, path="p/d.md")
    ki.ingest([doc], progress=False)
    stored = ki.get_document("d")
    assert stored is not None
    assert stored.text == doc.text
    assert (stored.title, stored.url, stored.publish_time, stored.path) == ("长文", "https://x",
                                                                           5, "p/d.md")
    assert ki.stats().chunks > 3


def test_qa_hidden_documents_are_never_returned(store: IndexStore) -> None:
    ki = store.create_or_open_for_write("kb")
    ki.ingest([_doc("v", "公开的资料。"), _doc("h", "隐藏的资料。", qa_visible=False)],
              progress=False)
    assert [h.doc_id for h in ki.search("资料", 10)] == ["v"]
    assert ki.get_document("h") is None
    both = ki.search("资料", 10, filter=SearchFilter(include_hidden=True))
    assert {h.doc_id for h in both} == {"v", "h"}
    assert ki.get_document("h", include_hidden=True) is not None


def test_reader_sees_new_commit_after_maybe_reload(store: IndexStore, index: KnowledgeIndex) -> None:
    now = [0.0]
    reader = IndexStore(store.root, clock=lambda: now[0]).open("kb")
    assert reader.search("樱桃", 5) == []
    index.ingest([_doc("c", "樱桃很甜。")], progress=False)
    assert reader.search("樱桃", 5) == []  # checked less than 0.5 s ago: no stat yet
    now[0] += 0.6
    assert [h.doc_id for h in reader.search("樱桃", 5)] == ["c"]


def test_generation_labels_the_commit_the_reader_loaded(store: IndexStore, index: KnowledgeIndex) -> None:
    now = [0.0]
    reader = IndexStore(store.root, clock=lambda: now[0]).open("kb")
    gen = reader.generation
    assert gen is not None and gen == read_generation(store.root / "kb") == reader.stats().generation
    hits, reusable = reader.answer("苹果", 5)
    assert [h.doc_id for h in hits] == ["a"] and reusable == gen
    assert reader.answer("苹果", 0) == ([], gen)
    index.ingest([_doc("c", "樱桃很甜。")], progress=False)
    assert reader.generation == gen  # no reload yet: it still names the commit loaded
    now[0] += 0.6
    assert reader.maybe_reload()
    new = reader.generation
    assert new is not None and new == read_generation(store.root / "kb") and new > gen
    assert reader.answer("樱桃", 5)[1] == new


def test_an_ingest_that_changes_nothing_makes_no_commit(store: IndexStore, index: KnowledgeIndex) -> None:
    gen = read_generation(store.root / "kb")
    same = index.ingest([_doc("a", "苹果是一种水果。")], progress=False)  # the fixture's 'a', unchanged
    assert (same.unchanged, same.commit) == (1, None) and read_generation(store.root / "kb") == gen
    none = index.ingest([], progress=False)
    assert none.commit is None and read_generation(store.root / "kb") == gen
    changed = index.ingest([_doc("a", "苹果是红色的水果。")], progress=False)
    assert changed.updated == 1 and changed.commit == read_generation(store.root / "kb") and changed.commit > gen


def test_second_writer_fails_with_clear_error(store: IndexStore, index: KnowledgeIndex) -> None:
    writer = open_writer(index._index, index.name, str(index.path))  # the one writer, held
    try:
        other = store.create_or_open_for_write("kb")
        with pytest.raises(IndexLockedError, match="another process"):
            other.ingest([_doc("z", "内容")], progress=False)
    finally:
        writer.rollback()
        writer.wait_merging_threads()


def test_schema_version_mismatch_raises(store: IndexStore, index: KnowledgeIndex) -> None:
    (index.path / SIDECAR).write_text(json.dumps({"schema_version": 0}), encoding="utf-8")
    with pytest.raises(SchemaVersionError, match="rebuild"):
        store.open("kb")
    with pytest.raises(SchemaVersionError):
        store.create_or_open_for_write("kb")


@pytest.mark.parametrize("damage", ["garbage meta.json", "empty meta.json", "segment file deleted",
                                    "segment file truncated"])
def test_a_damaged_index_raises_index_corrupt_error_naming_it(store: IndexStore, index: KnowledgeIndex,
                                                              damage: str) -> None:
    # Tantivy's own ValueError ('Data corrupted', 'Failed to open file for read') used to escape
    # as a traceback from `kbgate index list/stats/add`.
    folder = store.root / "kb"
    segment = sorted(folder.glob("*.idx"))[0]
    if damage == "garbage meta.json":
        (folder / "meta.json").write_text("{garbage")
    elif damage == "empty meta.json":
        (folder / "meta.json").write_text("")
    elif damage == "segment file deleted":
        segment.unlink()
    else:
        segment.write_bytes(b"xx")
    fresh = IndexStore(store.root)
    for attempt in (lambda: fresh.open("kb"), lambda: fresh.create_or_open_for_write("kb"),
                    lambda: fresh.check("kb")):
        with pytest.raises(IndexCorruptError) as exc:
            attempt()
        assert (exc.value.name, exc.value.reason) == ("kb", "damaged")
        assert str(exc.value).startswith(f"Index 'kb' at {folder} is damaged, Tantivy cannot open it (")
        assert "rebuild it: delete the folder" in str(exc.value) and "\n" not in exc.value.detail


def test_check_reads_the_disk_not_the_opened_index(store: IndexStore, index: KnowledgeIndex) -> None:
    reader = store.open("kb")
    store.check("kb")  # whole
    meta = (store.root / "kb" / "meta.json").read_bytes()
    (store.root / "kb" / "meta.json").write_text("{garbage")
    with pytest.raises(IndexCorruptError):
        store.check("kb")
    assert store.open("kb") is reader  # the cached reader is not what check() looks at
    (store.root / "kb" / "meta.json").write_bytes(meta)
    store.check("kb")
    shutil.rmtree(store.root / "kb")
    with pytest.raises(IndexNotFoundError) as missing:
        store.check("kb")
    assert missing.value.reason == "missing"


def test_an_opened_index_touches_its_folder_only_when_asked(store: IndexStore, index: KnowledgeIndex) -> None:
    # Tantivy's own reload watcher (a thread polling meta.json every 0.5 s) re-created its lock
    # file after meta.json changed, in the middle of a deletion of the folder ("Directory not
    # empty" from rmtree in test_check_reads_the_disk_not_the_opened_index): readers reload
    # only when kbgate asks (KnowledgeIndex.maybe_reload).
    store.open("kb")
    folder = store.root / "kb"
    meta = (folder / "meta.json").read_bytes()
    (folder / "meta.json").write_text("{garbage")
    time.sleep(0.7)
    (folder / "meta.json").write_bytes(meta + b" ")
    (folder / ".tantivy-meta.lock").unlink()
    time.sleep(1.2)
    assert not (folder / ".tantivy-meta.lock").exists()
    shutil.rmtree(folder)


def test_parallel_analysis_indexes_the_same_as_in_process(
    store: IndexStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexes.analyser as analyser_module
    import indexes.writer as writer_module

    docs = [_doc(f"d{i}", f"第{i}篇文档讲述密钥轮换与重放防护。" * (1 + i % 5)) for i in range(60)]
    one = store.create_or_open_for_write("one")
    one.ingest(docs, progress=False, workers=1)
    monkeypatch.setattr(analyser_module, "PARALLEL_MIN_DOCS", 10)
    monkeypatch.setattr(writer_module, "INGEST_BATCH_DOCS", 16)
    two = store.create_or_open_for_write("two")
    report = two.ingest(docs, progress=False, workers=2)
    assert report.added == 60
    assert one.stats().chunks == two.stats().chunks
    for q in ("密钥轮换", "第7篇", "重放"):
        # the same hits and scores; ties may come in another order (segments differ)
        assert sorted((h.id, round(h.score, 4)) for h in one.search(q, 60)) == sorted(
            (h.id, round(h.score, 4)) for h in two.search(q, 60))


def test_repeated_id_in_one_run_keeps_only_the_last(
    index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexes.writer as writer_module

    monkeypatch.setattr(writer_module, "INGEST_BATCH_DOCS", 1000)  # both copies queued in one batch
    index.ingest([_doc("dup", "第一版内容：苹果"), _doc("dup", "第二版内容：香蕉")], progress=False)
    doc = index.get_document("dup")
    assert doc is not None and "香蕉" in doc.text and "苹果" not in doc.text
    assert "dup" not in [h.doc_id for h in index.search("第一版 苹果", 5)]
    assert index.stats().documents == 3  # a, b from the fixture, and one dup


def test_duplicate_jsonl_ids_are_reported_the_last_wins_and_a_rerun_changes_nothing(
    tmp_path: Path, index: KnowledgeIndex
) -> None:
    from indexes.ingest import read_paths

    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in (
        {"id": "dup", "title": "第一版", "content": "苹果"},
        {"id": "other", "title": "其他", "content": "樱桃"},
        {"id": "dup", "title": "第二版", "content": "香蕉"},
    )) + "\n", encoding="utf-8")
    report = index.ingest(read_paths([rows]), progress=False)
    assert (report.added, report.updated, report.unchanged) == (2, 0, 0)
    assert report.errors == []
    assert report.warnings == [("rows.jsonl:3", "duplicate id 'dup' overrides rows.jsonl:1 "
                                                "(the last record with an id is indexed)")]
    doc = index.get_document("dup")
    assert doc is not None and doc.title == "第二版" and "香蕉" in doc.text

    again = index.ingest(read_paths([rows]), progress=False)
    assert (again.added, again.updated, again.unchanged, again.chunks) == (0, 0, 2, 0)
    assert len(again.warnings) == 1  # still reported
    doc = index.get_document("dup")
    assert doc is not None and doc.title == "第二版"


def test_duplicate_ids_in_different_batches_still_count_by_the_final_document(
    index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexes.writer as writer_module

    monkeypatch.setattr(writer_module, "INGEST_BATCH_DOCS", 1)  # every copy written on its own
    docs = [_doc("dup", "第一版：苹果"), _doc("c", "樱桃"), _doc("dup", "第二版：香蕉")]
    first = index.ingest(docs, progress=False)
    assert (first.added, first.updated, first.unchanged) == (2, 0, 0)
    assert [w for w, _ in first.warnings] == ["document 'dup'"]
    again = index.ingest(docs, progress=False)
    assert (again.added, again.updated, again.unchanged) == (0, 0, 2)
    doc = index.get_document("dup")
    assert doc is not None and "香蕉" in doc.text
    assert index.stats().documents == 4  # a, b, c, dup


def test_pipelined_workers_apply_each_delete_after_the_earlier_adds(
    index: KnowledgeIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    import indexes.analyser as analyser_module
    import indexes.writer as writer_module

    # Every document its own batch, analysed by two worker processes with batches queued
    # ahead: the second copy's delete must reach Tantivy after the first copy's chunks.
    monkeypatch.setattr(writer_module, "INGEST_BATCH_DOCS", 1)
    monkeypatch.setattr(analyser_module, "PARALLEL_MIN_DOCS", 0)
    docs = [_doc("dup", "第一版：苹果"), *(_doc(f"f{i}", f"填充{i}") for i in range(2)), _doc("dup", "第二版：香蕉")]
    report = index.ingest(docs, progress=False, workers=2)
    assert report.added == 3 and report.chunks == 4  # the first copy was written, then replaced
    assert "dup" not in [h.doc_id for h in index.search("第一版 苹果", 5)]
    assert [h.doc_id for h in index.search("第二版 香蕉", 1)] == ["dup"]
    assert index.stats().documents == 5  # a, b, f0, f1, dup


def test_failed_worker_processes_fall_back_to_this_process(
    store: IndexStore, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import functools
    import sys
    from concurrent.futures import ProcessPoolExecutor

    import indexes.analyser as analyser_module
    import indexes.writer as writer_module

    # Real worker processes that exit at start-up, as a script without a __main__ guard does.
    monkeypatch.setattr(analyser_module, "ProcessPoolExecutor",
                        functools.partial(ProcessPoolExecutor, initializer=sys.exit, initargs=(3,)))
    monkeypatch.setattr(writer_module, "INGEST_BATCH_DOCS", 4)
    monkeypatch.setattr(analyser_module, "PARALLEL_MIN_DOCS", 0)
    docs = [_doc(f"d{i}", f"第{i}篇讲密钥轮换。") for i in range(20)]
    ki = store.create_or_open_for_write("fallback")
    report = ki.ingest(docs, progress=False, workers=2)
    assert (report.added, report.chunks) == (20, 20)
    assert "analysis worker processes failed; indexing in this process" in capsys.readouterr().err
    assert ki.stats().chunks == 20 and len(ki.search("密钥轮换", 30)) == 20



def test_close_forgets_the_opened_indexes(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.create_or_open_for_write("kb").ingest([Document("a", "标题", (Section("", "正文内容"),))], progress=False)
    first = store.open("kb")
    assert store.open("kb") is first
    store.close()
    assert store.open("kb") is not first


def test_a_record_with_a_publish_time_no_index_can_hold_costs_only_that_record(store: IndexStore,
                                                                                tmp_path: Path) -> None:
    # The newcomer's F2: publish_time 1e20 used to crash the whole run in document_revision
    # (TypeError: Integer exceeds 64-bit range), committing nothing.
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in (
        {"id": "ok1", "title": "T", "content": "苹果"}, {"id": "d", "title": "D", "content": "香蕉",
                                                       "publish_time": 100000000000000000000},
        {"id": "e", "title": "E", "content": "葡萄", "publish_time": 1.5e300},
        {"id": "ok2", "title": "T2", "content": "樱桃", "publish_time": 1_764_580_000_000})), encoding="utf-8")
    ki = store.create_or_open_for_write("kb")
    report = ki.ingest(read_paths([rows]), progress=False)
    assert (report.added, [w for w, _ in report.errors]) == (2, ["rows.jsonl:2", "rows.jsonl:3"])
    assert [w for w, _ in report.warnings] == ["rows.jsonl:4"]  # read as milliseconds
    ok2 = ki.get_document("ok2")
    assert ok2 is not None and ok2.publish_time == 1_764_580_000
    # A Document built in code is refused alone too (readers never make one).
    report = ki.ingest([_doc("huge", "西瓜", publish_time=10**20), _doc("fine", "西瓜")], progress=False)
    assert report.added == 1 and report.errors == [("document 'huge'", "publish_time "
                                                    "100000000000000000000 is not a 64-bit integer")]


def test_a_stored_publish_time_is_read_back_in_seconds_or_not_at_all(store: IndexStore) -> None:
    # An index built before indexes.publish_time may hold milliseconds or any 64-bit value:
    # every read (Hit, StoredDocument) gives seconds in 0001..9999 or None, so no wing fails.
    ki = store.create_or_open_for_write("kb")
    ki.ingest([_doc("ms", "毫秒时间", publish_time=1_764_580_000_000),
               _doc("big", "巨大时间", publish_time=9_000_000_000_000_000_000),
               _doc("ok", "正常时间", publish_time=1_700_000_000)], progress=False)
    by_id = {h.doc_id: h.publish_time for h in ki.search("时间", 10)}
    assert by_id == {"ms": 1_764_580_000, "big": None, "ok": 1_700_000_000}
    assert [ki.get_document(d).publish_time for d in ("ms", "big", "ok")] == [  # type: ignore[union-attr]
        1_764_580_000, None, 1_700_000_000]


def test_a_lone_surrogate_costs_only_its_record(store: IndexStore, tmp_path: Path) -> None:
    # Retest finding D: "\ud800" in a JSONL text (or a front-matter title) crashed the whole run
    # in document_revision (orjson: surrogates not allowed), committing nothing.
    rows = tmp_path / "rows.jsonl"
    rows.write_text('{"id": "good1", "title": "good", "text": "好的记录"}\n'
                    '{"id": "sur", "title": "t", "text": "坏的 \\ud800 记录"}\n', encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text('---\ntitle: "a \\ud800"\n---\n正文\n', encoding="utf-8")
    ki = store.create_or_open_for_write("kb")
    report = ki.ingest(read_paths([rows, page]), progress=False)
    assert report.added == 1 and ki.get_document("good1") is not None
    assert [w for w, _ in report.errors] == ["rows.jsonl:2", "page.md"]
    assert all("lone surrogate" in reason for _, reason in report.errors)


def test_a_zero_width_character_neither_hides_a_word_nor_is_needed_to_find_it(store: IndexStore) -> None:
    ki = store.create_or_open_for_write("zw")
    ki.ingest([_doc("z", "页面里的 ZW\u200bMARKER 标记"), _doc("y", "另一页 PLAINWORD")], progress=False)
    assert [h.doc_id for h in ki.search("ZWMARKER", 5)] == ["z"]
    assert [h.doc_id for h in ki.search("PLAIN\u200bWORD", 5)] == ["y"]


def test_creating_a_new_index_waits_for_another_creator(store: IndexStore) -> None:
    """Two writers creating one new index (two server workers' first PUT, a worker and `kbgate
    index add`): the second waits for the first's lock, then opens what it made, never writing an
    empty meta.json over the first's commit."""
    import fcntl
    import os
    import threading
    import time

    from indexes.schema import CREATE_LOCK, build_schema, register_analyzers, write_sidecar

    folder = store.folder("new")
    folder.mkdir(parents=True)
    fd = os.open(folder / CREATE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # the first creator, mid-way
    opened: list[KnowledgeIndex] = []
    second = threading.Thread(target=lambda: opened.append(store.create_or_open_for_write("new")))
    second.start()
    time.sleep(0.3)
    assert second.is_alive()  # it waits instead of creating beside the first
    import tantivy

    first = tantivy.Index(build_schema(), path=str(folder))  # what the first creator makes and commits
    register_analyzers(first)
    write_sidecar(folder, {"chunk_chars": 800})
    w = first.writer(heap_size=15_000_000, num_threads=1)
    w.add_json('{"doc_id": "first", "chunk": 0, "revision": "r", "n_chunks": 1}')
    w.commit()
    w.wait_merging_threads()
    os.close(fd)
    second.join(10)
    assert opened and opened[0].revisions() == {"first": "r"}


def test_a_document_built_in_code_with_a_cover_size_out_of_range_is_indexed_without_it(
        store: IndexStore) -> None:
    """A width of 2^63 reached Tantivy's i64 field and failed the whole write."""
    from indexes.types import CoverImage
    ki = store.create_or_open_for_write("kb")
    big = _doc("a", "苹果是一种水果。", cover_image=CoverImage("https://a.example.com/c.png", -1, 2 ** 63))
    report = ki.ingest([big, _doc("b", "香蕉是一种黄色的水果。")], progress=False)
    assert not report.errors and report.added == 2
    wide = "'cover_image.width' 9223372036854775808 is out of range 1..100000 (pixels): not kept"
    assert ("a", wide) in report.warnings
    assert ("a", "'cover_image.height' -1 is out of range 1..100000 (pixels): not kept") in report.warnings
    assert ki.get_document("a") is not None
