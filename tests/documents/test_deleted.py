"""gateway/documents/deleted.py: a kept document comes back as it was stored (sections, pages,
metadata, cover, visibility), each deletion is its own entry, and the window's end purges it
(at the boundary, to the second), leaving any other file alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.documents import deleted
from indexes.types import CoverImage, Document, Section

NOW = 1_800_000_000.0
DOC = Document("guide/a.md", "标题", (Section("", "正文一。", "", 1), Section("参数", "正文二。", "配置", 2)),
               url="https://example.com/a", summary="摘要", publish_time=1_700_000_000,
               cover_image=CoverImage("https://example.com/c.png", 10, 20), path="guide/a.md", dataset="public",
               qa_visible=False, metadata=(("owner", "ann"), ("tags", ("a", "b"))), source="/srv/docs/guide/a.md")


def test_a_kept_document_comes_back_as_stored(tmp_path: Path) -> None:
    entry = deleted.keep(tmp_path, "docs", DOC, by="ann", now=NOW)
    assert oct((deleted.folder(tmp_path, "docs") / entry).stat().st_mode & 0o777) == oct(0o600)
    found = deleted.find(tmp_path, "docs", now=NOW + 10, days=7, doc_id=DOC.id)
    assert found is not None
    kept, doc = found
    assert doc == DOC and doc.source == DOC.source  # source is not compared by ==
    assert (kept.entry, kept.by, kept.deleted_at, kept.until) == (entry, "ann", NOW, NOW + 7 * 86400)


def test_each_deletion_is_its_own_entry_newest_first(tmp_path: Path) -> None:
    first = deleted.keep(tmp_path, "docs", DOC, by="ann", now=NOW)
    second = deleted.keep(tmp_path, "docs", DOC, by="bo", now=NOW + 60)
    assert [k.entry for k in deleted.listing(tmp_path, "docs", now=NOW + 61, days=7)] == [second, first]
    found = deleted.find(tmp_path, "docs", now=NOW + 61, days=7, doc_id=DOC.id)
    assert found is not None and found[0].entry == second
    deleted.drop(tmp_path, "docs", second)
    deleted.drop(tmp_path, "docs", "../../etc/passwd")  # not an entry's name: nothing
    assert [k.entry for k in deleted.listing(tmp_path, "docs", now=NOW + 61, days=7)] == [first]


@pytest.mark.parametrize(("age", "kept"), [(7 * 86400 - 1, True), (7 * 86400, False)])
def test_the_window_purges_at_its_end(tmp_path: Path, age: float, kept: bool) -> None:
    deleted.keep(tmp_path, "docs", DOC, by="ann", now=NOW)
    stray = deleted.folder(tmp_path, "docs") / ".a-write-in-progress"
    stray.write_text("x")
    assert bool(deleted.listing(tmp_path, "docs", now=NOW + age, days=7)) is kept
    assert stray.exists()


def test_purge_covers_every_index_and_removes_empty_folders(tmp_path: Path) -> None:
    deleted.keep(tmp_path, "docs", DOC, by="ann", now=NOW)
    deleted.keep(tmp_path, "kb", DOC, by="ann", now=NOW + 86400)
    assert deleted.purge(tmp_path, now=NOW + 7 * 86400, days=7) == 1
    assert not deleted.folder(tmp_path, "docs").exists() and deleted.folder(tmp_path, "kb").is_dir()
    assert deleted.purge(tmp_path, now=NOW + 86400, days=0) == 1  # a window of 0: nothing stays
    assert deleted.purge(tmp_path, now=NOW + 86400, days=0) == 0
