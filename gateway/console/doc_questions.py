"""The gap questions that came near one document: the gap groups (gateway.console.gaps) whose
last near-misses name it, for its page. Their kept text (the gap store's examples) only to an
admin and that index's owners; anyone else sees counts. Answered questions keep no text.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from gateway.console.gaps.groups import group
from gateway.console.users import ConsoleUser, can
from gateway.core.errors import DependencyUnavailable

MAX_SHOWN = 20  # groups a document page lists, most asked first


async def near(request: Request, user: ConsoleUser, index: str, doc_id: str) -> list[dict[str, Any]] | None:
    """[{id, count, last, relevance (this document's, 0..1), examples}] of the gap groups whose
    near-misses name `doc_id` of `index`, most asked first; examples only for who may read them
    (module doc). None when the gaps record (Redis) is not answering."""
    rt = request.app.state.runtime
    cfg = rt.config
    texts = cfg.admin.show_queries and can(user, "edit_documents", index)
    try:
        questions = await request.app.state.gaps.store.questions(cfg.gaps, rt.clock.now(), with_examples=texts)
    except DependencyUnavailable:
        return None
    out = []
    for g in group(questions, cfg.gaps.max_examples):
        mine = [b for b in g.best if b.get("index", index) == index and b.get("doc_id") == doc_id]
        if mine:
            out.append({"id": g.id, "count": g.count, "last": g.last,
                        "relevance": max(float(b.get("relevance") or 0.0) for b in mine),
                        "examples": list(g.examples) if texts else []})
    return out[:MAX_SHOWN]
