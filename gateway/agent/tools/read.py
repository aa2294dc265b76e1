"""The read tools of the Agent Access tool API (Agent Access API 技术设计 §9.1-§9.4): search, ask, get_page,
get_context. Each resolves its scope first (denials raise before any index is touched), then
reads only through the one scoped retrieval (gateway.core.retrieve).

Rationale: docs/design-notes.md, "gateway/agent/tools/read.py".
"""

from __future__ import annotations

from typing import Any

from gateway.agent import upstream_answer as answer
from gateway.agent.tools.request import ToolCall, invalid, public_scope, strings
from gateway.core import retrieve
from gateway.core.config import AgentRoute, floor_of
from gateway.core.errors import AccessDenied, AgentError, DependencyUnavailable, ToolError
from gateway.core.events import Asker
from gateway.core.scope import EffectiveScope, ScopeRequest, allows_path, excluded, narrow, resolve_agent_routes
from gateway.core.validate import clip
from indexes.types import Hit, StoredDocument

SEARCH_MAX_RESULTS = 50
SNIPPET_CHARS = 200
PASSAGE_CHARS = 400
SUMMARY_CHARS = 300


# ------------------------------------------------------------------ scope and retrieval


def resolve(tc: ToolCall, *, paths: tuple[str, ...] | None = None,
            datasets: tuple[str, ...] | None = None) -> list[tuple[AgentRoute, EffectiveScope]]:
    """The effective scope of this call per route (gateway.core.scope.resolve_agent_routes):
    the request's scope, narrowed by the input's own paths/datasets. Stored on the call for
    the answer and the audit. Raises AccessDenied (forbidden_tool, forbidden_scope,
    dataset_not_allowed)."""
    call = tc.call
    scope = call.body.get("scope", {})
    request = ScopeRequest(datasets=tuple(scope["datasets"]) if "datasets" in scope else None,
                           path_globs=tuple(scope["paths"]) if "paths" in scope else None,
                           include_working_docs=bool(scope.get("includeWorkingDocs", False)))
    request = narrow(request, paths=paths, datasets=datasets)
    named = tuple(scope["routes"]) if "routes" in scope else None
    call.scopes = resolve_agent_routes(call.cfg.agent, call.client, call.principal, tc.tool, request, named)
    return call.scopes


def _serving(tc: ToolCall) -> list[tuple[AgentRoute, EffectiveScope]]:
    """The resolved routes that may serve; a disabled (named) route is a warning."""
    out = []
    for route, eff in tc.call.scopes:
        if route.enabled:
            out.append((route, eff))
        else:
            tc.call.warn("access.tool_failed", f"route {route.name!r} is disabled")
    return out


def _unavailable(tc: ToolCall, route: AgentRoute) -> None:
    tc.call.warn("access.tool_failed", f"the index of route {route.name!r} is unavailable", retryable=True)


def _settle_partial(tc: ToolCall, served: int) -> None:
    """No route served → the call failed (retryable); some did not → partial."""
    if served == 0:
        raise ToolError("access.tool_failed", "no index of the scope is available", retryable=True)
    if tc.call.warnings:
        tc.call.partial = True


async def scoped_search(tc: ToolCall, query: str, limit: int, *,
                        content_chars: int = 1) -> list[tuple[AgentRoute, Hit]]:
    """Best hits across the resolved routes (retrieve.search_many: re-checked against each
    scope, each route's relevance floor), highest relevance first, one per document."""
    serving = _serving(tc)
    targets = [retrieve.Target(r, e, floor_of(r.relevance_floor, tc.call.cfg.search), r.dials) for r, e in serving]
    asker = Asker("agent", tc.call.client.id, tuple(r.name for r, _ in serving), tc.tool)
    merged = await retrieve.search_many(tc.call.rt, targets, query, limit, summary_chars=SNIPPET_CHARS,
                                        content_chars=content_chars, asker=asker)
    for route in merged.failed:
        _unavailable(tc, route)
    _settle_partial(tc, len(serving) - len(merged.failed))
    return merged.hits


def find_page(tc: ToolCall, *, path: str | None, doc_id: str | None) -> tuple[AgentRoute, StoredDocument]:
    """The authorized document at `path` or with id `doc_id`.

    A path outside every route's scope, or an id inside a tree no caller may read (the
    always-excluded trees, working docs not opted into: `scope.excluded`), is
    access.forbidden_scope before any index is opened; a missing, hidden or out-of-scope
    document is access.page_not_found (no existence oracle)."""
    candidates = tc.call.scopes
    if path is not None:
        candidates = [(r, e) for r, e in candidates if allows_path(e, path)]
        if not candidates:
            raise AccessDenied("access.forbidden_scope", "the path is outside the caller's scope")
    if doc_id is not None:
        candidates = [(r, e) for r, e in candidates if not excluded(e, doc_id)]
        if not candidates:
            raise AccessDenied("access.forbidden_scope", "the document id names a tree that is never readable")
    served = 0
    for route, eff in candidates:
        if not route.enabled:
            tc.call.warn("access.tool_failed", f"route {route.name!r} is disabled")
            continue
        try:
            doc = retrieve.find(tc.call.rt, eff, path=path, doc_id=doc_id)
        except DependencyUnavailable:
            _unavailable(tc, route)
            continue
        served += 1
        if doc is not None:
            return route, doc
    if served == 0:
        raise ToolError("access.tool_failed", "no index of the scope is available", retryable=True)
    raise ToolError("access.page_not_found")


def citation(route: str, doc_id: str, title: str, path: str, dataset: str, revision: str,
             url: str | None = None, chunk: int | None = None) -> dict[str, Any]:
    """A Citation.json dict for an authorized document."""
    c: dict[str, Any] = {"docId": doc_id, "title": title, "path": path, "dataset": dataset, "route": route,
                         "revision": revision}
    if url:
        c["url"] = url
    if chunk is not None:
        c["chunk"] = chunk
    return c


def _hit_citation(route: AgentRoute, h: Hit) -> dict[str, Any]:
    return citation(route.name, h.doc_id, h.title, h.path, h.dataset, h.revision, h.url, h.chunk)


def _utf8_cut(text: str, max_bytes: int) -> tuple[str, bool]:
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", errors="ignore"), True


def _naming(err: AccessDenied | ToolError, path: str) -> AgentError:
    """`err` of one get_context path, its message naming that path (the caller's own input,
    clipped): which page of several could not be read."""
    message = f"path {clip(path, 120)!r}: {err.message}"
    if isinstance(err, AccessDenied):
        return AccessDenied(err.code, message)
    return ToolError(err.code, message, retryable=err.retryable, retry_after=err.retry_after)


# ------------------------------------------------------------------ the tools


async def tool_search(tc: ToolCall) -> dict[str, Any]:
    """search (Agent Access API 技术设计 §9.1): input {query, limit ≤ 50} → {results: SearchResult[]}."""
    f = tc.fields()
    f.only({"query", "limit"})
    query = f.string("query", non_blank=True, max_len=512)
    limit = f.integer("limit", 10, lo=1, hi=SEARCH_MAX_RESULTS)
    resolve(tc)
    hits = await scoped_search(tc, query, limit)
    tc.call.event.extra["results"] = len(hits)
    return {"results": [{"id": f"{r.name}:{h.id}", "title": h.title, "snippet": h.summary,
                         "score": round(h.relevance, 4), "citation": _hit_citation(r, h)} for r, h in hits]}


async def tool_ask(tc: ToolCall) -> dict[str, Any]:
    """ask (Agent Access API 技术设计 §9.2): input {question, limit ≤ 10, strict?} → Answer.

    A no-answer is passed with an answer.no_answer info, or failed when strict.
    Raises ToolError('access.tool_failed') when the upstream Answer API fails.
    """
    f = tc.fields()
    f.only({"question", "limit", "strict"})
    question = f.string("question", non_blank=True, max_len=512)
    limit = f.integer("limit", 3, lo=1, hi=10)
    strict = f.boolean("strict", False)
    resolve(tc)
    passages = [answer.Passage(h.content, h.relevance, _hit_citation(r, h))
                for r, h in await scoped_search(tc, question, limit, content_chars=PASSAGE_CHARS)]
    url, client = tc.call.cfg.access.answer_url, tc.clients.get().answer_client
    if client is not None and url and passages:
        result = await answer.upstream(client, url, question, passages, limit)
    else:
        result = answer.extractive(question, passages)
    if result["answer"] is None:
        tc.call.event.extra["no_answer"] = result["noAnswerReason"]
        tc.call.warn("answer.no_answer", f"no answer in scope ({result['noAnswerReason']})",
                     severity="error" if strict else "info")
    return result


async def tool_get_page(tc: ToolCall) -> dict[str, Any]:
    """get_page (Agent Access API 技术设计 §9.3): input {path | documentId, fullText?, maxBytes?} → Page.

    Default: front matter, summary and citation. fullText needs the policy tool
    'get_page.full_text' (else access.forbidden_tool) and is cut at maxBytes UTF-8 bytes
    (≤ access.page_max_bytes)."""
    f = tc.fields()
    f.only({"path", "documentId", "fullText", "maxBytes"})
    path = f.optional_string("path", non_blank=True, max_len=300)
    doc_id = f.optional_string("documentId", non_blank=True, max_len=300)
    if (path is None) == (doc_id is None):
        raise invalid("input needs exactly one of path or documentId")
    full = f.boolean("fullText", False)
    cap = tc.call.cfg.access.page_max_bytes
    max_bytes = f.integer("maxBytes", cap, lo=1, hi=cap)
    resolve(tc)
    if full and "get_page.full_text" not in tc.call.client.policy.tools:
        raise AccessDenied("access.forbidden_tool", "full page text is not allowed for this client")
    route, doc = find_page(tc, path=path, doc_id=doc_id)
    summary, _ = _utf8_cut(doc.summary or doc.text[:SUMMARY_CHARS], max_bytes)
    front: dict[str, Any] = {"path": doc.path, "dataset": doc.dataset, "revision": doc.revision}
    if doc.url:
        front["url"] = doc.url
    if doc.publish_time is not None:
        front["publishTime"] = doc.publish_time
    out: dict[str, Any] = {"docId": doc.doc_id, "title": doc.title, "frontMatter": front, "summary": summary,
                           "citation": citation(route.name, doc.doc_id, doc.title, doc.path, doc.dataset,
                                                doc.revision, doc.url),
                           "truncated": False, "limits": {"maxBytes": max_bytes, "fullText": full}}
    if full:
        out["text"], out["truncated"] = _utf8_cut(doc.text, max_bytes)
    tc.call.event.extra["full_text"] = full
    return out


async def tool_get_context(tc: ToolCall) -> dict[str, Any]:
    """get_context (Agent Access API 技术设计 §9.4): input {question | paths, limit, strategy} → ContextPack
    with the effective scope and the limits (pages, bytes per page, total bytes).

    By paths, a path that cannot be read (outside the scope, never readable, absent, its
    index down) is a warning naming it and the result partial (Agent Access API 技术设计 §12); only when no
    path can be read does the call fail, with the first path's error naming it."""
    f = tc.fields()
    f.only({"question", "paths", "limit", "strategy"})
    a = tc.call.cfg.access
    question = f.optional_string("question", non_blank=True, max_len=512)
    paths = strings(f, "paths", max_items=20, max_len=300)
    strategy = f.data.get("strategy", "paths" if paths and question is None else "search")
    if strategy not in ("search", "paths") or (strategy == "search" and question is None) or (
            strategy == "paths" and paths is None):
        raise invalid("strategy 'search' needs question, 'paths' needs paths")
    max_pages = min(f.integer("limit", a.context_max_pages, lo=1, hi=20), a.context_max_pages)
    resolve(tc)
    items: list[tuple[AgentRoute, str, str, str, str, str, str | None, str]] = []
    if question is not None and strategy == "search":
        for r, h in await scoped_search(tc, question, max_pages, content_chars=a.context_max_bytes_per_page):
            items.append((r, h.doc_id, h.title, h.path, h.dataset, h.revision, h.url, h.content))
    else:
        refused: list[AgentError] = []
        for p in (paths or ())[:max_pages]:
            try:
                r, d = find_page(tc, path=p, doc_id=None)
            except (AccessDenied, ToolError) as exc:
                refused.append(_naming(exc, p))  # this path only: the others still answer (§12 partial)
                continue
            items.append((r, d.doc_id, d.title, d.path, d.dataset, d.revision, d.url, d.text))
        if refused and not items:
            raise refused[0]
        for one in refused:
            tc.call.warn(one.code, one.message, retryable=one.retryable)
        tc.call.event.extra["paths_refused"] = [one.code for one in refused]
        if tc.call.warnings:
            tc.call.partial = True
    pages: list[dict[str, Any]] = []
    total, truncated = 0, len(paths or []) > max_pages
    for r, doc_id, title, path, dataset, rev, url, text in items:
        budget = min(a.context_max_bytes_per_page, a.context_max_total_bytes - total)
        if budget <= 0:
            truncated = True
            break
        excerpt, cut = _utf8_cut(text, budget)
        total += len(excerpt.encode("utf-8"))
        truncated = truncated or cut
        pages.append({"docId": doc_id, "title": title, "excerpt": excerpt, "truncated": cut,
                      "citation": citation(r.name, doc_id, title, path, dataset, rev, url)})
    tc.call.event.extra |= {"pages": len(pages), "context_bytes": total}
    out: dict[str, Any] = {"strategy": strategy, "scope": public_scope(tc.call.scopes),
                           "limits": {"maxPages": max_pages, "maxBytesPerPage": a.context_max_bytes_per_page,
                                      "maxTotalBytes": a.context_max_total_bytes},
                           "pages": pages, "truncated": truncated}
    if question is not None:
        out["question"] = question
    return out
