"""The try on the synonyms page: the index itself searched for a question with the synonyms it
serves now, to see a rule fire right where it was written (the caller's whole answer is
`/admin/try`'s). Shapes: `tried` → {"index", "expansions": [{"term", "synonym"}], "analysis":
[{"word", "weight", "matched", "via"}], "hits": [{"rank", "id", "doc_id", "chunk", "title",
"path", "relevance", "terms", "synonym_terms": [{"synonym", "term"}]}]}. The analysis and the
matched terms are the try's own (gateway.core.explain); nothing here is recorded as a question.
"""

from __future__ import annotations

from typing import Any

from anyio import to_thread

from gateway.core.explain import analysis_of, matched_terms, synonym_terms
from gateway.core.runtime import Runtime
from indexes.analysis import query_terms
from indexes.synonyms import analysed

LIMIT = 5


def _search(rt: Runtime, index: str, query: str) -> dict[str, Any]:
    idx = rt.index(index)
    hits = idx.search(query, LIMIT)
    fired = analysed(query, idx.synonyms).expansions
    texts = [f"{h.title}\n{h.content}" for h in hits]
    plain = query_terms(query)
    return {
        "index": index,
        "expansions": [{"term": t, "synonym": s} for t, s in fired],
        "analysis": [{"word": a.word, "weight": a.weight, "matched": a.matched, "via": a.via}
                     for a in analysis_of(idx.question(query), texts)],
        "hits": [{"rank": i + 1, "id": h.id, "doc_id": h.doc_id, "chunk": h.chunk, "title": h.title, "path": h.path,
                  "relevance": h.relevance, "terms": matched_terms(plain, text),
                  "synonym_terms": [{"synonym": s, "term": t} for s, t in synonym_terms(fired, text)]}
                 for i, (h, text) in enumerate(zip(hits, texts, strict=True))],
    }


async def tried(rt: Runtime, index: str, query: str) -> dict[str, Any]:
    """Search `index` for `query` (module doc), in a worker thread. Raises DependencyUnavailable
    (the index cannot be opened)."""
    return await to_thread.run_sync(_search, rt, index, query)
