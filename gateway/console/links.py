"""The console's stable URLs of an index, a document and a chunk: every page that names one
(try results, gap near-misses, served counts) links through these, never by hand.

    /admin/indexes                              every index            (JSON: /admin/indexes.json)
    /admin/indexes/{index}?path=&dataset=&page= its documents          (JSON: /admin/indexes/{index}.json)
    /admin/indexes/{index}/document?id={id}     a document's chunks    (JSON: …/document.json?id={id})
    …/document?id={id}#chunk-{n}                its chunk n (0-based, a hit's `chunk`)

The id travels in the query (percent-encoded), so an id with '/', '#', '?' or a line break is
one URL and never a path of its own.
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
