"""What `/admin/try` shows beside the template (templates/try.html): the words of each reason
a chunk is not in the answer, and the line of a search's retrieval dials (`dials_text`, also
`kbgate try`'s). The question is shown back only inside the admin's own form (it
is the admin's input); it is never logged. Numbers carry `data-*` attributes so tests read them
exactly."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

REASONS = {
    "no_match": "matched nothing: no word of the question (nor a synonym) in it",
    "floor": "under the route's floor: matched some words, relevance too low",
    "rerank_threshold": "reranker's score under the route's rerank threshold",
    "scope": "outside the scope (re-check)",
    "one_per_document": "another chunk of a document already answered",
    "outside_scope": "outside the caller's scope",
    "metadata_condition": "excluded by a metadata condition",
    "limit": "ranked after the last answer (limit)",
    "merged": "the same document, answered by another route",
}

MATCHED = {
    "direct": "matched",
    "synonym": "matched through a synonym",
    "unmatched": "unmatched",
}
GAP_REASONS = {
    "no_answer": "no hit",
    "low_score": "best hit under the gap threshold",
    "answered": "answered",
}

def dials_text(dials: Mapping[str, Any]) -> str:
    """The retrieval dials a search used (`gateway.core.explain.effective_dials`) as one line of
    text, 'dense_share 0.5 · candidates 30 · rerank off · neighbours 1 (set by the route: ...)'."""
    shown = [f"{k} {('on' if v else 'off') if isinstance(v, bool) else '-' if v is None else v}"
             for k, v in dials.items() if k != "route"]
    route = dials.get("route") or []
    return " · ".join(shown) + (f" (set by the route: {', '.join(route)})" if route else " (the index's)")
