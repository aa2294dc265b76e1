"""indexes.ingest.metadata: which front-matter / JSONL fields a document keeps, and that every
field not kept is reported (through the readers and the ingest report)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from indexes.ingest import read_paths
from indexes.ingest.metadata import MAX_BYTES, MAX_FIELDS, MAX_ITEMS, MAX_STRING_CHARS, keep_metadata
from indexes.records import document_revision
from indexes.store import IndexStore
from indexes.types import Document, IngestWarning


def test_kept_values_and_their_forms() -> None:
    kept, warnings = keep_metadata({
        "author": "  张三 ", "version": 5, "ratio": 0.25, "draft": True, "day": dt.date(2024, 5, 1),
        "at": dt.datetime(2024, 5, 1, 8, 30, tzinfo=dt.UTC), "tags": ["运维", "", None, 3],
        "empty": "", "none": None, "nothing": [], "title": "reserved", "作者": "李四",
    }, frozenset({"title"}), "a.md")
    assert warnings == []
    assert kept == (("at", "2024-05-01T08:30:00+00:00"), ("author", "张三"), ("day", "2024-05-01"), ("draft", "true"),
                    ("ratio", 0.25), ("tags", ("运维", 3)), ("version", 5), ("作者", "李四"))
    assert list(kept) == sorted(kept)


def test_every_field_not_kept_is_a_warning_naming_it() -> None:
    fields = {
        "nested": {"a": 1}, "deep": [{"a": 1}], "long": "x" * (MAX_STRING_CHARS + 1), "many": ["t"] * (MAX_ITEMS + 1),
        "huge": 2**64, "inf": float("inf"), "bad\x01name": "v", "": "v", "n" * 65: "v", "path": "a/b.md",
        "document_id": "x", "fine": "kept",
    }
    kept, warnings = keep_metadata(fields, frozenset(), "rows.jsonl", 7)
    assert kept == (("fine", "kept"),)
    assert len(warnings) == len(fields) - 1
    assert all(isinstance(w, IngestWarning) and w.where == "rows.jsonl:7" for w in warnings)
    text = "\n".join(w.reason for w in warnings)
    for name in ("'nested'", "'deep'", "'long'", "'many'", "'huge'", "'inf'", "'bad?name'", "'path'",
                 "'document_id'"):
        assert f"metadata field {name} not kept" in text, name
    assert "built-in metadata name" in text


def test_field_and_byte_bounds() -> None:
    kept, warnings = keep_metadata({f"f{i:02d}": i for i in range(MAX_FIELDS + 3)}, frozenset(), "a.md")
    assert len(kept) == MAX_FIELDS and len(warnings) == 3
    assert "at most 32 metadata fields" in warnings[0].reason and "f32" in warnings[0].reason
    big = {f"s{i}": "字" * 500 for i in range(10)}
    kept, warnings = keep_metadata(big, frozenset(), "a.md")
    assert 0 < len(kept) < 10 and len(warnings) == 10 - len(kept)
    assert len(json.dumps([list(p) for p in kept], ensure_ascii=False).encode()) <= MAX_BYTES + 64
    assert f"at most {MAX_BYTES} bytes" in warnings[0].reason


def test_markdown_front_matter_kept_and_reported(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("---\ntitle: 页\nsummary: 摘要\naliases: ['/docs/a', '/docs/b']\n"
                                   "author: 张三\nreleased: 2024-05-01\nopts: {x: 1}\n---\n\n# 页\n\n正文\n", "utf-8")
    items = list(read_paths([tmp_path]))
    [doc] = [i for i in items if isinstance(i, Document)]
    assert dict(doc.metadata) == {"aliases": ("/docs/a", "/docs/b"), "author": "张三", "released": "2024-05-01"}
    [warning] = [i for i in items if isinstance(i, IngestWarning)]
    assert warning.where == "a.md" and "'opts' not kept" in warning.reason


def test_jsonl_fields_kept_and_reported_with_their_line(tmp_path: Path) -> None:
    rows = [{"id": 1, "title": "t", "content": "正文", "url": "https://x", "author": "李四", "version": 2},
            {"id": 2, "content": "正文", "meta": {"nested": True}}]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n", "utf-8")
    items = list(read_paths([tmp_path / "rows.jsonl"]))
    docs = [i for i in items if isinstance(i, Document)]
    assert [dict(d.metadata) for d in docs] == [{"author": "李四", "version": 2}, {}]
    [warning] = [i for i in items if isinstance(i, IngestWarning)]
    assert warning.where == "rows.jsonl:2" and "'meta' not kept" in warning.reason


def test_ingest_report_lists_fields_not_kept_and_revision_covers_metadata(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("---\nauthor: [{bad: 1}]\nteam: 运维\n---\n\n正文\n", "utf-8")
    index = IndexStore(tmp_path / "idx").create_or_open_for_write("k")
    report = index.ingest(read_paths([tmp_path / "docs"]), progress=False)
    assert report.added == 1 and report.errors == []
    assert report.warnings == [("a.md", "metadata field 'author' not kept: an object inside a list is not kept "
                                        "(strings, numbers, booleans, dates, and flat lists of them are)")]
    doc = Document("x", "t", (), metadata=(("team", "运维"),))
    assert document_revision(doc) != document_revision(Document("x", "t", (), metadata=(("team", "运营"),)))


def test_why_a_value_is_not_kept_says_what_it_is() -> None:
    # "a list is not kept (… lists of them are)" contradicted itself for a list inside a list.
    kept, warnings = keep_metadata({"grid": [["a", "b"], ["c"]], "opts": {"x": 1}, "rows": [{"x": 1}], "ok": ["a"]},
                                   frozenset(), "a.md")
    assert kept == (("ok", ("a",)),)
    assert [w.reason for w in warnings] == [
        "metadata field 'grid' not kept: a list inside a list is not kept "
        "(strings, numbers, booleans, dates, and flat lists of them are)",
        "metadata field 'opts' not kept: an object (a mapping) is not kept "
        "(strings, numbers, booleans, dates, and flat lists of them are)",
        "metadata field 'rows' not kept: an object inside a list is not kept "
        "(strings, numbers, booleans, dates, and flat lists of them are)"]


def test_a_string_value_with_control_characters_is_not_kept() -> None:
    kept, warnings = keep_metadata({"author": "张\x1b[31m三", "team": ["运维", "a\x00b"], "ok": "好"},
                                   frozenset(), "rows.jsonl", 3)
    assert kept == (("ok", "好"),)
    assert sorted(w.reason for w in warnings) == [
        "metadata field 'author' not kept: strings with control characters or non-characters are not kept",
        "metadata field 'team' not kept: strings with control characters or non-characters are not kept"]
