"""gateway/sync/apply.py: a run's plans as one change set through indexes.changes.apply_changes,
against a real Tantivy index."""

from __future__ import annotations

from pathlib import Path

from gateway.core.config.sync import SyncSource
from gateway.sync.apply import apply_sync, change_set
from gateway.sync.plan import Plan
from indexes import ledger
from indexes.stats import read_generation
from indexes.store import IndexStore
from indexes.types import Document, IngestError, IngestWarning, Section


def _doc(doc_id: str, text: str, source: str, origin: str = "") -> Document:
    return Document(doc_id, f"标题{doc_id}", (Section("", text),), source=source, origin=origin or doc_id)


def _plan(name: str, *items: Document | IngestError | IngestWarning, deletes: set[str] | None = None) -> Plan:
    return Plan(SyncSource("kb", name, "folder", "/srv/" + name), upserts=list(items), deletes=deletes or set())


def test_one_change_set_from_every_plan() -> None:
    first = _plan("one", _doc("x", "旧的", "/srv/one/x.md", "one/x.md"), IngestError("bad.pdf", "encrypted",
                                                                                      kind="encrypted"),
                  deletes={"gone", "y"})
    second = _plan("two", IngestWarning("empty.md", "empty file: skipped"), _doc("y", "新的", "/srv/two/y.md"),
                   _doc("x", "后读到的", "/srv/two/x.md", "two/x.md"))
    changes, errors, warnings = change_set([first, second], replace=True)
    assert [(d.id, d.source) for d in changes.upserts] == [("y", "/srv/two/y.md"), ("x", "/srv/two/x.md")]
    assert changes.deletes == ("gone",) and changes.replace  # 'y' is upserted, not deleted
    assert errors == [("bad.pdf", "encrypted")]
    assert warnings == [("empty.md", "empty file: skipped"),
                        ("two/x.md", "duplicate id 'x' overrides one/x.md (the last one read is indexed)")]


def test_a_refused_document_is_left_out_and_the_rest_applied_in_one_commit(tmp_path: Path) -> None:
    index = IndexStore(tmp_path).create_or_open_for_write("kb")
    index.ingest([_doc("held", "别处的文档", "/elsewhere/held.md"), _doc("old", "将被删除", "/srv/one/old.md")],
                 progress=False)
    before = read_generation(index.path)
    changes, _, _ = change_set([_plan("one", _doc("held", "同步来的", "/srv/one/held.md"),
                                      _doc("new", "新文档", "/srv/one/new.md"), deletes={"old"})], replace=False)
    report, refused = apply_sync(index, changes, wait_seconds=0, progress=False)
    assert [(r.doc_id, r.kind) for r in refused] == [("held", "source")] and "/elsewhere/held.md" in refused[0].reason
    assert (report.count("added"), report.count("deleted"), report.count("updated")) == (1, 1, 0)
    assert report.commit is not None and report.commit == report.generation == read_generation(index.path) > before
    assert sorted(index.revisions()) == ["held", "new"]
    assert index.get_document("held").text.endswith("别处的文档")  # type: ignore[union-attr]
    docs, held = ledger.entries(index.path)  # what the console's document list shows
    assert docs["new"].via == "sync" and "old" not in docs
    assert (held["held"].via, held["held"].kind) == ("sync", "source") and "/elsewhere/held.md" in held["held"].reason

    again, refused_again = apply_sync(index, changes, wait_seconds=0, progress=False)
    assert [r.doc_id for r in refused_again] == ["held"]
    assert again.commit is None and again.count("unchanged") == 1 and again.count("absent") == 1
    assert read_generation(index.path) == report.commit
