"""The console's stable URLs of an index, a document and a chunk: every page that names one
(try results, gap near-misses, served counts) links through these, never by hand.

Rationale: docs/design-notes.md, "gateway/console/links.py".
"""

from __future__ import annotations

from urllib.parse import quote, urlencode

INDEXES = "/admin/indexes"


def index_url(index: str, **filters: str | int) -> str:
    """The documents page of `index`, with the filters given (path, dataset, page) that are set."""
    query = urlencode({k: v for k, v in filters.items() if v and not (k == "page" and v == 1)})
    return f"{INDEXES}/{quote(index, safe='')}" + (f"?{query}" if query else "")


def document_url(index: str, doc_id: str, chunk: int | None = None, *, json: bool = False) -> str:
    """The page of document `doc_id` of `index` (json: its JSON twin); chunk: its anchor."""
    page = "document.json" if json else "document"
    url = f"{INDEXES}/{quote(index, safe='')}/{page}?{urlencode({'id': doc_id})}"
    return url if chunk is None or json else f"{url}#chunk-{chunk}"
