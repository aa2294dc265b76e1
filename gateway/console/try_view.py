"""What `/admin/try` shows beside the template (templates/try.html): the words of each reason
a chunk is not in the answer. The question is shown back only inside the admin's own form (it
is the admin's input); it is never logged. Numbers carry `data-*` attributes so tests read them
exactly."""

from __future__ import annotations

REASONS = {
    "no_match": "matched nothing: no word of the question (nor a synonym) in it",
    "floor": "under the route's floor: matched some words, relevance too low",
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
