"""indexes.browse: the owner's listing, chunk views, the hidden count, and a stored document put
back as the Document it was written from (same revision), on a real Tantivy index."""

from __future__ import annotations

from pathlib import Path

from indexes.browse import ChunkView, as_document, chunk_views, count_hidden, document_rows
from indexes.ingest import read_data
from indexes.store import IndexStore
from indexes.types import Document
from tests.support.documents import AGENT_DOCS, KB_DOCS

MARKDOWN = ("---\ntitle: 年假制度\nurl: https://hr.example.com/leave\nteam: hr\n---\n# 年假制度\n\n"
            "## 申请\n\n" + "员工提前三天在系统中申请年假，主管审批后生效。" * 40
            + "\n\n### 例外\n\n紧急情况可事后补办。\n\n## 结转\n\n未休年假可结转到次年三月底。\n")


def _store(tmp_path: Path, docs: list[Document]) -> IndexStore:
    store = IndexStore(tmp_path / "indexes")
    w = store.create_or_open_for_write("kb", chunk_chars=200)
    w.ingest(docs, progress=False, workers=1)
    w.close()
    return store


def _seen(chunks: list[ChunkView]) -> list[tuple[int, str, str, int, int | None]]:
    """What a reader sees of each chunk (section numbers shift when empty sections go)."""
    return [(c.n, c.heading, c.text, c.overlap, c.page) for c in chunks]


def _markdown() -> Document:
    [doc] = [d for d in read_data(MARKDOWN.encode(), "hr/leave.md") if isinstance(d, Document)]
    return doc


def test_a_document_disabled_and_enabled_again_keeps_its_chunks(tmp_path: Path) -> None:
    """Chunks merge short sections and drop empty ones, so a stored document is not the one
    written (its revision differs); written back, it keeps every chunk's heading and text."""
    md = _markdown()
    docs = [*KB_DOCS, *AGENT_DOCS, md]
    store = _store(tmp_path, docs)
    searcher, schema = store.open("kb").reader()
    before = {d.id: _seen(chunk_views(searcher, schema, d.id)) for d in docs}
    assert as_document(searcher, schema, "absent") is None
    w = store.create_or_open_for_write("kb", chunk_chars=200)
    for visible in (False, True):
        searcher, schema = w.reader()
        back = [as_document(searcher, schema, d.id, qa_visible=visible) for d in docs]
        assert all(b is not None and b.qa_visible is visible and b.source == "" for b in back)
        w.ingest([b for b in back if b is not None], progress=False, workers=1)
        searcher, schema = w.reader()
        assert count_hidden(searcher, schema) == (0 if visible else len(docs))
        for d in docs:
            assert _seen(chunk_views(searcher, schema, d.id)) == before[d.id], d.id
    w.close()
    md_back = as_document(*w.reader(), md.id)
    assert md_back is not None and md_back.url == md.url and md_back.metadata == md.metadata


def test_rows_chunks_and_hidden_count(tmp_path: Path) -> None:
    md = _markdown()
    store = _store(tmp_path, [*AGENT_DOCS, md])
    searcher, schema = store.open("kb").reader()
    rows = {r.doc_id: r for r in document_rows(searcher, schema)}
    assert set(rows) == {d.id for d in [*AGENT_DOCS, md]}
    assert rows[md.id].title == "年假制度" and rows[md.id].path == "hr/leave.md" and rows[md.id].chunks > 2
    hidden = {d.id for d in AGENT_DOCS if not d.qa_visible}
    assert hidden and {i for i, r in rows.items() if not r.qa_visible} == hidden
    assert count_hidden(searcher, schema) == len(hidden)
    chunks = chunk_views(searcher, schema, md.id)
    assert [c.n for c in chunks] == list(range(rows[md.id].chunks))
    assert {c.heading for c in chunks} == {"申请", "例外"}  # 结转 is merged into 例外's chunk
    assert chunk_views(searcher, schema, "absent") == []
