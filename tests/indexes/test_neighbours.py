"""Neighbouring chunks appended to a hit (indexes/neighbours.py), on a real index: in document
order, overlaps not repeated, within the content bound, nothing shown twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexes.documents import chunks_of, stored_str
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document, Hit, Section

# Seven sentences of about 90 characters, one section: chunks of at most 200 characters, each
# starting with the last sentence of the one before (its overlap); 演练 only in sentence 3.
SENTENCES = [f"第{i}句话，" + ("关键词演练出现在这里，" if i == 3 else "") + "普通的说明文字" * 11 + "。"
             for i in range(7)]


@pytest.fixture(name="index")
def _index(tmp_path: Path) -> KnowledgeIndex:
    ki = IndexStore(tmp_path / "indexes").create_or_open_for_write("kb", chunk_chars=200)
    ki.ingest([Document("doc", "手册", (Section("总览", "".join(SENTENCES)),)),
               Document("other", "别的", (Section("", "关键词演练在别的文档里。"),))], progress=False)
    return ki


def texts(index: KnowledgeIndex) -> list[tuple[str, int]]:
    """(text, overlap) of each stored chunk of 'doc', in order."""
    return [(stored_str(c, "text"), int(c.get_first("overlap") or 0))
            for c in chunks_of(index._index.searcher(), index._schema, "doc")]


def joined(chunks: list[tuple[str, int]], first: int, last: int) -> str:
    """The document's text from chunk `first` to `last`, each overlap dropped once."""
    return chunks[first][0] + "".join(t[o:] for t, o in chunks[first + 1:last + 1])


def own_hits(index: KnowledgeIndex) -> list[Hit]:
    """The chunks of 'doc' holding 演练, each with its own content only."""
    return [h for h in index.search("演练", 10, one_per_document=False, content_chars=5000) if h.doc_id == "doc"]


def test_a_hit_gets_its_neighbours_in_document_order_without_repeating_overlaps(index: KnowledgeIndex) -> None:
    chunks = texts(index)
    assert len(chunks) >= 5 and any(o for _, o in chunks)  # several chunks, overlapping
    hit = own_hits(index)[0]
    c = hit.chunk
    assert 0 < c < len(chunks) - 1
    [wide] = index.with_neighbours([hit], 1, 5000)
    assert wide.content == "总览\n" + joined(chunks, c - 1, c + 1)
    assert (wide.id, wide.relevance, wide.summary) == (hit.id, hit.relevance, hit.summary)
    assert index.with_neighbours([hit], 0, 5000) == [hit]


def test_neighbours_stay_within_the_content_bound_nearest_first(index: KnowledgeIndex) -> None:
    chunks = texts(index)
    hit = own_hits(index)[0]
    c = hit.chunk
    [same] = index.with_neighbours([hit], 3, len(hit.content) + 5)  # no neighbour fits
    assert same.content == hit.content
    one_before = "总览\n" + joined(chunks, c - 1, c)
    [wider] = index.with_neighbours([hit], 3, len(one_before) + 5)  # the chunk before fits, not the one after
    assert wider.content == one_before


def test_a_neighbour_that_is_a_hit_or_already_shown_is_not_repeated(index: KnowledgeIndex) -> None:
    chunks = texts(index)
    hits = own_hits(index)
    assert len(hits) == 2 and abs(hits[0].chunk - hits[1].chunk) == 1  # sentence 3 lies in two chunks
    first, second = index.with_neighbours(hits, 8, 100_000)
    lo, hi = sorted(h.chunk for h in hits)
    by_chunk = {first.chunk: first.content, second.chunk: second.content}
    assert by_chunk[lo] == "总览\n" + joined(chunks, 0, lo)  # stops before the other hit
    assert by_chunk[hi] == "总览\n" + joined(chunks, hi, len(chunks) - 1)
