"""Where the console shows a document and its chunks: one function every page links through.

`document_url(index, doc_id, chunk)` → '/admin/indexes/{index}/documents/{doc_id}' (each part
percent-encoded, '/' in a document id included), with '#chunk-N' for a chunk. The index
browser's own function takes its place once it lands; pages call only this one.
"""

from __future__ import annotations

from urllib.parse import quote


def document_url(index: str, doc_id: str, chunk: int | None = None) -> str:
    """The console page of document `doc_id` of `index` (and its chunk `chunk`, 0-based)."""
    url = f"/admin/indexes/{quote(index, safe='')}/documents/{quote(doc_id, safe='')}"
    return url if chunk is None else f"{url}#chunk-{chunk}"
