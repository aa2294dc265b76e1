"""`/admin/gaps` and `/admin/documents`: the knowledge owner's view of what went unanswered and
which documents were served, behind the admin token (gateway.console).

GET  /admin/gaps              the gap groups (HTML)        GET /admin/gaps.json      the same as JSON
POST /admin/gaps/file         form `group`, `csrf` → files or bumps the group's improvement task
                              (JSON in and out with a Bearer token: {"group": id}, for `kbgate gaps --file`)
GET  /admin/documents         served counts per index      GET /admin/documents.json the same as JSON

CSRF: a POST carried by the login cookie must hold `csrf` = HMAC-SHA-256(the admin token,
'kbgate-admin-csrf'), which only a page served to the admin contains, and an `Origin`, when
sent, must be this host; a POST with `Authorization: Bearer` (a tool, never sent by a browser
on its own) needs neither. The cookie is SameSite=Strict besides.
"""

from __future__ import annotations

import hashlib
import hmac
from html import escape
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.agent.tools.clients import LazyClients
from gateway.console import MAX_FORM_BYTES, _html, _not_found, is_admin
from gateway.console.auth import COOKIE, bearer
from gateway.console.gaps.filing import file_group
from gateway.console.gaps.groups import MIN_GROUP_PREFIX, Group, group
from gateway.console.gaps.pages import NAV, documents_page, gaps_page, page
from gateway.console.gaps.record import GapRecorder
from gateway.console.gaps.store import days_back
from gateway.console.page import login_page
from gateway.core.bodies import read_limited
from gateway.core.errors import DependencyUnavailable, ToolError
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

MAX_DOCUMENT_ROWS = 1000


def csrf_token(admin_token: str) -> str:
    """The CSRF field value of pages served to the holder of `admin_token` (module doc)."""
    return hmac.new(admin_token.encode("utf-8"), b"kbgate-admin-csrf", hashlib.sha256).hexdigest()


def _state(request: Request) -> tuple[Runtime, GapRecorder]:
    return request.app.state.runtime, request.app.state.gaps


def _denied(request: Request, as_json: bool) -> Response | None:
    rt, _ = _state(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    if is_admin(request):
        return None
    if as_json:
        return JSONResponse({"error": "admin token required"}, status_code=401,
                            headers={"cache-control": "no-store", "www-authenticate": "Bearer"})
    return _html(login_page(), 401)


async def _groups(request: Request) -> list[Group]:
    rt, rec = _state(request)
    cfg = rt.config
    show = cfg.admin.show_queries
    questions = await rec.store.questions(cfg.gaps, rt.clock.now(), with_examples=show)
    return group(questions, cfg.gaps.max_examples)


async def gaps_html(request: Request, filed: dict[str, Any] | None = None, error: str | None = None,
                    status: int = 200) -> Response:
    """GET /admin/gaps."""
    if (denied := _denied(request, False)) is not None:
        return denied
    rt, rec = _state(request)
    try:
        groups = await _groups(request)
    except DependencyUnavailable:
        groups, error = [], "The gaps record (Redis) is not answering; try again shortly."
    token = request.cookies.get(COOKIE) or bearer(request.headers.get("authorization")) or ""
    return _html(gaps_page(groups, csrf=csrf_token(token), show_queries=rt.config.admin.show_queries,
                           shared=rec.store.shared, threshold=rt.config.gaps.threshold, filed=filed, error=error),
                 status)


async def gaps_json(request: Request) -> Response:
    """GET /admin/gaps.json: {"groups": [Group.public()], "shared": bool}."""
    if (denied := _denied(request, True)) is not None:
        return denied
    rt, rec = _state(request)
    try:
        groups = await _groups(request)
    except DependencyUnavailable:
        return JSONResponse({"error": "gaps record unavailable"}, status_code=503)
    return JSONResponse({"groups": [g.public() for g in groups], "shared": rec.store.shared,
                         "threshold": rt.config.gaps.threshold}, headers={"cache-control": "no-store"})


def _same_origin(request: Request) -> bool:
    origin = request.headers.get("origin")
    if origin is None or origin == "null":  # absent, or 'null' under the pages' Referrer-Policy: no-referrer
        return True  # (Chromium): the csrf field still decides
    return urlsplit(origin).netloc == request.headers.get("host", "")


async def file_task(request: Request) -> Response:
    """POST /admin/gaps/file (module doc)."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    if (denied := _denied(request, by_tool)) is not None:
        return denied
    rt, _ = _state(request)
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError:
        return _refuse(by_tool, 413, "the form is too large or did not arrive in time")
    if by_tool:
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _refuse(True, 400, "the body must be a JSON object {\"group\": id}")
        wanted = data.get("group") if isinstance(data, dict) else None
    else:
        fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
        wanted = fields["group"][0] if fields.get("group") else None
        sent = fields["csrf"][0] if fields.get("csrf") else ""
        token = request.cookies.get(COOKIE) or ""
        if not _same_origin(request) or not hmac.compare_digest(sent.encode(), csrf_token(token).encode()):
            return _refuse(False, 403, "the form is stale or did not come from this console; reload the page")
    if not isinstance(wanted, str) or not wanted:
        return _refuse(by_tool, 400, "name the group to file")
    if len(wanted) < MIN_GROUP_PREFIX:  # too short to name one group: say so, not "no such group"
        return _refuse(by_tool, 400, f"give the group's id or at least its first {MIN_GROUP_PREFIX} characters")
    try:
        groups = await _groups(request)
    except DependencyUnavailable:
        return _refuse(by_tool, 503, "the gaps record (Redis) is not answering; try again shortly")
    found = next((g for g in groups if g.id == wanted or g.id.startswith(wanted)), None)
    if found is None:
        return _refuse(by_tool, 404, "no such gap group (it may have expired)")
    clients: LazyClients = request.app.state.gap_clients
    try:
        result = await file_group(clients.get(), found, show_queries=rt.config.admin.show_queries,
                                  labels=rt.config.access.labels)
    except ToolError as exc:
        return _refuse(by_tool, 503, f"the tracker did not take the task ({exc.code})")
    if by_tool:
        return JSONResponse({"group": found.id, **result}, headers={"cache-control": "no-store"})
    return await gaps_html(request, filed=result)


def _refuse(as_json: bool, status: int, message: str) -> Response:
    if as_json:
        return JSONResponse({"error": message}, status_code=status, headers={"cache-control": "no-store"})
    return _html(page("kbgate: knowledge gaps", f'{NAV}<p class="error" role="alert">{escape(message)}</p>'), status)


async def _documents(request: Request) -> tuple[list[tuple[str, list[tuple[str, str, int]], int | None]], bool]:
    rt, rec = _state(request)
    days = days_back(rt.clock.now(), rt.config.gaps.keep_days)
    out: list[tuple[str, list[tuple[str, str, int]], int | None]] = []
    for name in rt.routed_indexes():
        served = await rec.store.served(name, days)
        try:
            idx = rt.index(name)
            docs = sorted(idx.revisions())
        except (DependencyUnavailable, OSError, ValueError):
            out.append((name, [], None))
            continue
        ranked = sorted(docs, key=lambda d: (-served.get(d, 0), d))[:MAX_DOCUMENT_ROWS]
        rows = []
        for d in ranked:
            doc = idx.get_document(d, include_hidden=True)
            rows.append((d, doc.title if doc is not None else "", served.get(d, 0)))
        out.append((name, rows, len(docs)))
    return out, rec.store.shared


async def documents_html(request: Request) -> Response:
    """GET /admin/documents."""
    if (denied := _denied(request, False)) is not None:
        return denied
    rt, _ = _state(request)
    try:
        indexes, shared = await _documents(request)
        error = None
    except DependencyUnavailable:
        indexes, shared, error = [], True, "The hit statistics (Redis) are not answering; try again shortly."
    return _html(documents_page(indexes, days=rt.config.gaps.keep_days, shared=shared, error=error))


async def documents_json(request: Request) -> Response:
    """GET /admin/documents.json: {"indexes": {name: {"documents": n, "served": {doc: n}, "never": [doc]}}}."""
    if (denied := _denied(request, True)) is not None:
        return denied
    try:
        indexes, shared = await _documents(request)
    except DependencyUnavailable:
        return JSONResponse({"error": "hit statistics unavailable"}, status_code=503)
    return JSONResponse({"indexes": {name: {"documents": total, "served": {d: n for d, _, n in rows if n},
                                            "never": [d for d, _, n in rows if n == 0]}
                                     for name, rows, total in indexes}, "shared": shared,
                         }, headers={"cache-control": "no-store"})


ROUTES = [
    Route("/admin/gaps", gaps_html, methods=["GET"]),
    json_route("/admin/gaps.json", gaps_json, ["GET"]),
    Route("/admin/gaps/file", file_task, methods=["POST"]),
    Route("/admin/documents", documents_html, methods=["GET"]),
    json_route("/admin/documents.json", documents_json, ["GET"]),
]
