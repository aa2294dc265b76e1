"""The one endpoint: `POST {dify.prefix}/retrieval`, Dify's External Knowledge API.

Rationale: docs/design-notes.md, "gateway/dify/retrieval.py".
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers

from gateway.core import retrieve
from gateway.core.config import floor_of
from gateway.core.errors import DependencyUnavailable, DifyError
from gateway.core.events import Asker
from gateway.core.frame import Call
from gateway.core.scope import require_tool, resolve_agent
from gateway.core.validate import clip
from gateway.dify.records import records
from gateway.dify.request import read

GRANT = "dify.retrieval"


def _no_body(headers: Headers) -> bool:
    """True when the request declares an empty body (Content-Length: 0, or no length and no
    chunked transfer: HTTP/1.1 then has none), as Dify's registration POST does."""
    length = headers.get("content-length")
    if length is not None:
        return length.strip() == "0"
    return "transfer-encoding" not in headers


async def retrieval(call: Call) -> dict[str, Any]:
    """Dify's retrieval: {"records": [...]} best first (see the module docstring for the path
    and its error codes)."""
    cfg = call.cfg.dify
    require_tool(call.client, GRANT)  # before the body: a key without the grant fails registration
    if _no_body(call.request.headers):
        raise DifyError("dify.body_empty", "no request body: this is Dify's check when an admin adds the API, "
                                           "and the API key is valid; retrieval requests carry a JSON body")
    req = read(call.fields(await call.json_object()), cfg)
    call.event.route = clip(req.knowledge_id, 128)
    # A denial (AccessDenied) leaves as it is: DifyWire.refuse answers it as 2001 or 1002.
    route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, req.knowledge_id, GRANT)
    call.event.scope = eff.summary()
    call.scopes.append((route, eff))
    extra: dict[str, Any] = {"top_k": req.top_k, "score_threshold": req.score_threshold,
                             "conditions": len(req.where.conditions) if req.where else 0}
    if req.skipped:
        extra["conditions_skipped"] = req.skipped
    call.event.extra.update(extra)
    if not route.enabled:
        raise DifyError("dify.knowledge_unavailable", f"knowledge {clip(req.knowledge_id, 64)!r} is disabled")
    try:
        found = await retrieve.search(call.rt, eff, req.query, req.top_k, summary_chars=1,
                                      content_chars=cfg.content_chars,
                                      floor=floor_of(route.relevance_floor, call.cfg.search), where=req.where,
                                      dials=route.dials,
                                      asker=Asker("dify", call.client.id, (route.name,), "retrieval"))
    except DependencyUnavailable:
        raise DifyError("dify.knowledge_unavailable", f"knowledge {clip(req.knowledge_id, 64)!r} cannot be "
                                                      "searched right now") from None
    out = records(found.hits, eff.index, threshold=req.score_threshold, snippet=route.dials.summary_chars is not None)
    call.event.extra.update({"hits": len(found.hits), "records": len(out), "search_ms": round(found.took_ms, 3)})
    return {"records": out}
