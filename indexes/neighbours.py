"""Neighbouring chunks appended to a hit (a route's `neighbours` dial, `indexes.types.Dials`).

Rationale: docs/design-notes.md, "indexes/neighbours.py".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import tantivy
from tantivy import Occur, Query

from .documents import joined_text
from .search import bounded
from .types import Hit

__all__ = ["MAX_NEIGHBOURS", "widened", "with_neighbours"]

MAX_NEIGHBOURS = 8
"""The largest `neighbours` a route may set: chunks on each side of a hit."""


def with_neighbours(searcher: tantivy.Searcher, schema: tantivy.Schema, hits: Sequence[Hit], n: int,
                    content_chars: int) -> list[Hit]:
    """`hits` (in their order) with each content rebuilt from its chunk and up to `n` chunks on
    each side (module doc), at most `content_chars` characters. n <= 0: `hits` unchanged."""
    return widened(hits, n, content_chars, lambda h: _window(searcher, schema, h, n))


def widened(hits: Sequence[Hit], n: int, content_chars: int, window_of: Callable[[Hit], dict[int, Any]]) -> list[Hit]:
    """`with_neighbours` given window_of(hit): chunk number → stored chunk (anything with
    `get_first`) of the hit's document, for chunks hit.chunk - n .. hit.chunk + n that exist
    (`indexes.milvus` reads them from its rows)."""
    if n <= 0 or not hits:
        return list(hits)
    taken = {(h.doc_id, h.chunk) for h in hits}
    out = []
    for h in hits:
        window = window_of(h)
        if h.chunk not in window:  # the hit's chunk is gone from this commit: keep the hit as it was
            out.append(h)
            continue
        kept = {h.chunk}
        sides = [iter(range(h.chunk - 1, h.chunk - n - 1, -1)), iter(range(h.chunk + 1, h.chunk + n + 1))]
        while sides:
            for side in list(sides):
                c = next(side, None)
                if c is None or c not in window or (h.doc_id, c) in taken or \
                        len(joined_text(window, kept | {c})) > content_chars:
                    sides.remove(side)
                    continue
                kept.add(c)
        taken |= {(h.doc_id, c) for c in kept}
        out.append(dataclasses.replace(h, content=bounded(joined_text(window, kept), content_chars)))
    return out


def _window(searcher: tantivy.Searcher, schema: tantivy.Schema, hit: Hit, n: int) -> dict[int, tantivy.Document]:
    """chunk number → stored chunk of `hit`'s document, for chunks hit.chunk - n .. hit.chunk + n."""
    numbers = [c for c in range(hit.chunk - n, hit.chunk + n + 1) if c >= 0]
    q = Query.boolean_query([
        (Occur.Must, Query.term_query(schema, "doc_id", hit.doc_id)),
        (Occur.Must, Query.boolean_query([(Occur.Should, Query.term_query(schema, "chunk", c)) for c in numbers])),
    ])
    docs = (searcher.doc(a) for _, a in searcher.search(q, len(numbers), count=False).hits)
    return {int(d.get_first("chunk") or 0): d for d in docs}
