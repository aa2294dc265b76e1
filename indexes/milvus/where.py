"""Metadata conditions (`MetaFilter`, Dify's `metadata_condition`) on a Milvus index's candidates.

Rationale: docs/design-notes.md, "indexes/milvus/where.py".
"""

from __future__ import annotations

from collections.abc import Iterable

import tantivy

from ..metadata import FIELDS, decode, filter_query, index_terms
from ..types import Document, MetaFilter
from .rows import Row

__all__ = ["admitted"]


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("doc_id", stored=True, tokenizer_name="raw")
    for name in FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    return sb.build()


def admitted(rows: Iterable[Row], where: MetaFilter) -> set[str]:
    """The chunk ids of `rows` whose document's metadata `where` admits. Raises ValueError for a
    pattern Tantivy cannot compile (`indexes.metadata.condition_problem` tells beforehand)."""
    schema = _schema()
    index = tantivy.Index(schema)
    writer = index.writer(15_000_000, 1)
    rows = list(rows)
    for n, r in enumerate(rows):
        pt = r.get_first("publish_time")
        doc = Document(str(r.get_first("doc_id")), str(r.get_first("title") or ""), (), url=r.get_first("url"),
                       publish_time=pt, path=str(r.get_first("path") or ""), dataset=str(r.get_first("dataset") or ""),
                       metadata=decode(r.get_first("metadata")))
        writer.add_document(tantivy.Document(doc_id=str(n), **index_terms(doc)))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    q = filter_query(schema, searcher, where)
    if q is None:
        return {str(r.data["id"]) for r in rows}
    found = searcher.search(q, max(len(rows), 1), count=False).hits
    return {str(rows[int(str(searcher.doc(a).get_first("doc_id")))].data["id"]) for _, a in found}
