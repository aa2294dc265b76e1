"""Knowledge gaps and hit statistics: what callers asked that the knowledge could not answer,
which documents were served, and the owner's pages and improvement tasks for them.

Rationale: docs/design-notes.md, "gateway/console/gaps/__init__.py".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gateway.agent.tools.clients import LazyClients
from gateway.console.gaps.record import GapRecorder
from gateway.console.gaps.states import make_states
from gateway.console.gaps.store import make_gap_store
from gateway.console.gaps.task_life import ROUTES as LIFE_ROUTES
from gateway.console.gaps.tasks import ROUTES as TASK_ROUTES
from gateway.console.gaps.views import ROUTES as VIEW_ROUTES
from gateway.console.scores import cut
from gateway.core.explain import analysis_of
from gateway.core.runtime import Runtime

ROUTES = [*VIEW_ROUTES, *TASK_ROUTES, *LIFE_ROUTES]

__all__ = ["ROUTES", "GapRecorder", "LazyClients", "make_recorder"]


def make_recorder(rt: Runtime, count: Callable[[str, str], None] | None = None) -> GapRecorder:
    """The worker's recorder over the configured store (Redis when replay.redis_url is set),
    keying questions by each index's own analysis (`gateway.console.gaps.keys`)."""
    cfg = rt.config
    store = make_gap_store(cfg.replay.redis_url, cfg.replay.key_prefix, cfg.replay.timeout_seconds)
    states = make_states(cfg.replay.redis_url, cfg.replay.key_prefix, cfg.replay.timeout_seconds)
    return GapRecorder(lambda: rt.config, rt.clock.now, store, count,
                       lambda index, query: [u.text for u in rt.index(index).question(query).units], states,
                       lambda index, doc_id, query: unmatched_words(rt, index, doc_id, query),
                       lambda index, query, limit: nearest_pages(rt, index, query, limit))


def nearest_pages(rt: Runtime, index: str, query: str, limit: int) -> list[dict[str, Any]]:
    """`index`'s `limit` nearest pages for `query`, unscoped and with no floor, each {index,
    doc_id, title, path, relevance (cut to 6 places), unmatched: the question's words it lacks}."""
    idx = rt.index(index)
    asked = idx.question(query)
    return [{"index": index, "doc_id": h.doc_id, "title": h.title, "path": h.path, "relevance": cut(h.relevance, 6),
             "unmatched": [t.word for t in analysis_of(asked, [h.title, h.content]) if t.matched == "unmatched"]}
            for h in idx.search(query, limit, floor=0.0)]


def unmatched_words(rt: Runtime, index: str, doc_id: str, query: str) -> list[str]:
    """The content words of `query` (as `index` analyses it) that document `doc_id` does not hold
    in its title or text (`gateway.core.explain.analysis_of`); [] when the document is gone."""
    idx = rt.index(index)
    doc = idx.get_document(doc_id, include_hidden=True)
    if doc is None:
        return []
    return [t.word for t in analysis_of(idx.question(query), [doc.title, doc.text]) if t.matched == "unmatched"]
