"""What `/admin/try` shows beside the template (templates/try.html): the words of each reason
a chunk is not in the answer, and the line of a search's retrieval dials (`dials_text`, also
`kbgate try`'s). The question is shown back only inside the admin's own form (it
is the admin's input); it is never logged. Numbers carry `data-*` attributes so tests read them
exactly. The reasons' words are msgids: the page shows them translated, `kbgate try` as they are."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.console.i18n import N_

REASONS = {
    "no_match": N_("matched nothing: no word of the question (nor a synonym) in it"),
    "floor": N_("under the route's floor: matched some words, relevance too low"),
    "rerank_threshold": N_("reranker's score under the route's rerank threshold"),
    "scope": N_("outside the scope (re-check)"),
    "one_per_document": N_("another chunk of a document already answered"),
    "outside_scope": N_("outside the caller's scope"),
    "metadata_condition": N_("excluded by a metadata condition"),
    "limit": N_("ranked after the last answer (limit)"),
    "merged": N_("the same document, answered by another route"),
}

MATCHED = {
    "direct": N_("matched"),
    "synonym": N_("matched through a synonym"),
    "unmatched": N_("unmatched"),
}
GAP_REASONS = {
    "no_answer": N_("no hit"),
    "low_score": N_("best hit under the gap threshold"),
    "answered": N_("answered"),
}

def dials_text(dials: Mapping[str, Any]) -> str:
    """The retrieval dials a search used (`gateway.core.explain.effective_dials`) as one line of
    text, 'dense_share 0.5 · candidates 30 · rerank off · neighbours 1 (set by the route: ...)'."""
    shown = [f"{k} {('on' if v else 'off') if isinstance(v, bool) else '-' if v is None else v}"
             for k, v in dials.items() if k != "route"]
    route = dials.get("route") or []
    return " · ".join(shown) + (f" (set by the route: {', '.join(route)})" if route else " (the index's)")
