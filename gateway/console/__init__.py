"""`/admin/`: the operators' deliveries page, behind the admin token.

GET  /admin/                  the page (or the login form, 401, when not logged in)
     ?tenant=NAME&outcome=ok|failed|REASON&n=1..500
POST /admin/login             form field `token` → cookie, 303 to /admin/
POST /admin/logout            clears the cookie
GET  /admin/deliveries.json   the same records as JSON (for tools such as `kbgate onboard`)

With no `admin.token_sha256` configured every /admin path answers 404, as if absent.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from gateway.console.auth import COOKIE, COOKIE_MAX_AGE, bearer, token_ok
from gateway.console.deliveries import DeliveryLog
from gateway.console.page import OUTCOME_FILTERS, deliveries_page, login_page
from gateway.core.bodies import read_limited
from gateway.core.errors import RET_BY_REASON, DependencyUnavailable
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

MAX_FORM_BYTES = 4096
MAX_ROWS = 500
DEFAULT_ROWS = 50

SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def _deliveries(request: Request) -> DeliveryLog:
    log: DeliveryLog = request.app.state.deliveries
    return log


def _not_found() -> Response:
    return Response("Not Found", status_code=404, media_type="text/plain", headers={"cache-control": "no-store"})


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


def is_admin(request: Request) -> bool:
    """True when the request carries the admin token (Bearer header or login cookie)."""
    digest = _runtime(request).config.admin.token_sha256
    presented = bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)
    return token_ok(presented, digest)


def matches(record: dict[str, Any], outcome: str) -> bool:
    """Outcome filter: '' any, 'ok', 'failed' (anything not ok), or one exact reason."""
    got = record.get("outcome")
    if outcome == "":
        return True
    if outcome == "failed":
        return got != "ok"
    return bool(got == outcome)


async def _query(request: Request) -> tuple[str, str, int] | Response:
    rt = _runtime(request)
    tenant = request.query_params.get("tenant", "")
    outcome = request.query_params.get("outcome", "")
    n_raw = request.query_params.get("n", str(DEFAULT_ROWS))
    if tenant and tenant not in rt.config.tenants:
        return _html("<!DOCTYPE html><meta charset=utf-8><p>Unknown tenant filter.</p>", 400)
    if outcome not in OUTCOME_FILTERS and outcome not in RET_BY_REASON:
        return _html("<!DOCTYPE html><meta charset=utf-8><p>Unknown outcome filter.</p>", 400)
    n = int(n_raw) if n_raw.isdigit() else DEFAULT_ROWS
    return tenant, outcome, max(1, min(MAX_ROWS, n))


async def _sections(rt: Runtime, log: DeliveryLog, tenant: str, outcome: str,
                    n: int) -> list[tuple[str, list[dict[str, Any]]]]:
    names = [tenant] if tenant else sorted(rt.config.tenants)
    # With an outcome filter read the whole ring, so `n` matching rows can be found.
    fetch = rt.config.admin.keep_deliveries if outcome else n
    out = []
    for name in names:
        rows = [r for r in await log.recent(name, fetch) if matches(r, outcome)]
        out.append((name, rows[:n]))
    return out


async def admin_page(request: Request) -> Response:
    """GET /admin/: the deliveries page; the login form (401) without a valid token."""
    rt = _runtime(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    if not is_admin(request):
        return _html(login_page(), 401)
    q = await _query(request)
    if isinstance(q, Response):
        return q
    tenant, outcome, n = q
    error = None
    try:
        sections = await _sections(rt, _deliveries(request), tenant, outcome, n)
    except DependencyUnavailable:
        sections, error = [], "The deliveries record (Redis) is not answering; try again shortly."
    show = rt.config.admin.show_queries
    if not show:  # records written while it was on must not leak after it is turned off
        for _, rows in sections:
            for r in rows:
                r.pop("query", None)
    outcomes = ["ok", "failed", *(reason for reason in RET_BY_REASON if reason != "success")]
    return _html(deliveries_page(sections, tenants=sorted(rt.config.tenants), outcomes=outcomes, tenant=tenant,
                                 outcome=outcome, n=n, show_queries=show, shared=_deliveries(request).shared,
                                 error=error))


async def deliveries_json(request: Request) -> Response:
    """GET /admin/deliveries.json?tenant=&outcome=&n=: {"deliveries": [records newest first]}."""
    rt = _runtime(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    if not is_admin(request):
        return JSONResponse({"error": "admin token required"}, status_code=401,
                            headers={"cache-control": "no-store", "www-authenticate": "Bearer"})
    q = await _query(request)
    if isinstance(q, Response):
        return JSONResponse({"error": "bad filter"}, status_code=400)
    tenant, outcome, n = q
    try:
        sections = await _sections(rt, _deliveries(request), tenant, outcome, n)
    except DependencyUnavailable:
        return JSONResponse({"error": "deliveries record unavailable"}, status_code=503)
    rows = sorted((r for _, rs in sections for r in rs), key=lambda r: r.get("received_at") or 0, reverse=True)
    if not rt.config.admin.show_queries:
        for r in rows:
            r.pop("query", None)
    return JSONResponse({"deliveries": rows[:n], "shared": _deliveries(request).shared},
                        headers={"cache-control": "no-store"})


async def login(request: Request) -> Response:
    """POST /admin/login (application/x-www-form-urlencoded, field `token`)."""
    rt = _runtime(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError as exc:
        if exc.problem.kind == "too_large":
            return _html(login_page("The form is too large."), 413)
        return _html(login_page("The form did not arrive in time."), 408)
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=4)
    token = fields["token"][0] if fields.get("token") else None
    if not token_ok(token, rt.config.admin.token_sha256):
        return _html(login_page("That token is not valid."), 401)
    assert token is not None
    resp = RedirectResponse("/admin/", status_code=303, headers={"cache-control": "no-store"})
    resp.set_cookie(COOKIE, token, max_age=COOKIE_MAX_AGE, path="/admin", httponly=True, samesite="strict",
                    secure=request.url.scheme == "https")
    return resp


async def logout(request: Request) -> Response:
    """POST /admin/logout: clear the cookie, back to the login form."""
    if _runtime(request).config.admin.token_sha256 is None:
        return _not_found()
    resp = RedirectResponse("/admin/", status_code=303, headers={"cache-control": "no-store"})
    resp.delete_cookie(COOKIE, path="/admin", httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return resp


async def admin_root(request: Request) -> Response:
    """GET /admin → /admin/ (404 when the admin page is disabled)."""
    if _runtime(request).config.admin.token_sha256 is None:
        return _not_found()
    return RedirectResponse("/admin/", status_code=308)


ROUTES = [
    Route("/admin", admin_root, methods=["GET"]),
    Route("/admin/", admin_page, methods=["GET"]),
    json_route("/admin/deliveries.json", deliveries_json, ["GET"]),
    Route("/admin/login", login, methods=["POST"]),
    Route("/admin/logout", logout, methods=["POST"]),
]
