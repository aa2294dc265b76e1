"""Logging in and out of the console, and its front door.

Rationale: docs/design-notes.md, "gateway/console/login.py".
"""

from __future__ import annotations

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.console import device
from gateway.console.auth import COOKIE, token_ok
from gateway.console.csrf import FIELD, login_ok, post_ok
from gateway.console.i18n import _
from gateway.console.proxy import client_address, secure
from gateway.console.render import (
    MAX_FORM_BYTES,
    form_fields,
    login_form,
    message,
    not_found,
    runtime,
    see_other,
    too_many_fields,
    unavailable,
)
from gateway.console.session import LoginBusy, console_enabled, cookie_value, user_of
from gateway.console.sessions import LIFETIME as COOKIE_MAX_AGE
from gateway.console.sessions import Sessions, SessionsUnavailable
from gateway.console.throttle import Throttle, keys
from gateway.core.bodies import read_limited
from gateway.core.validate import ProblemError

LOGIN_FIELDS = 4
"""The most fields the login form may send (user, token, csrf and one to spare)."""


async def login(request: Request) -> Response:
    """POST /admin/login (application/x-www-form-urlencoded)."""
    rt = runtime(request)
    if not console_enabled(rt.config):
        return not_found()
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError as exc:
        if exc.problem.kind == "too_large":
            return login_form(request, status=413, text=_("The form is too large."))
        return login_form(request, status=408, text=_("The form did not arrive in time."))
    fields = form_fields(body, LOGIN_FIELDS)
    if fields is None:
        return login_form(request, status=400, text=too_many_fields(LOGIN_FIELDS))
    name = fields.get("user", "").strip()[:64]
    if not login_ok(request, fields.get(FIELD)):
        return login_form(request, status=403, name=name, text=_("This login form expired or came from another "
                                                                 "site: log in again from this page."))
    token = fields.get("token") or None
    sessions: Sessions = request.app.state.sessions
    now = rt.clock.now()
    known = device.device_of(sessions.key, request.cookies.get(device.COOKIE), name, now)
    counted = keys(name or None, client_address(request), known)  # the admin token ('') has no name key
    throttle: Throttle = request.app.state.login_throttle
    admin = not name and token_ok(token, rt.config.admin.token_sha256)  # the right one never waits
    wait = None if admin else await throttle.retry_after([k for k in counted if k[0] == "device"] if known
                                                         else counted)
    if wait is not None:
        resp = login_form(request, status=429, name=name, text=_("Too many failed logins: try again in %(n)s s.",
                                                                                   n=wait))
        resp.headers["retry-after"] = str(wait)
        return resp
    value = cookie_value(name, token)
    try:
        user = await user_of(rt.config, value, trusted=known is not None) if value is not None else None
    except LoginBusy:
        resp = login_form(request, status=503, name=name, text=_("Too many logins are being checked right now: "
                                                                 "try again in a second."))
        resp.headers["retry-after"] = "1"
        return resp
    if user is None:
        await throttle.failed(counted)
        return login_form(request, status=401, name=name,
                          text=_("That user and credential do not match.") if name else _("That token is not valid."))
    try:
        value = await sessions.issue(rt.config, name)
    except (SessionsUnavailable, RedisError, ValueError):
        return unavailable(request)
    resp = see_other("/admin/")
    resp.set_cookie(COOKIE, value, max_age=COOKIE_MAX_AGE, path="/admin", httponly=True, samesite="strict",
                    secure=secure(request))
    resp.set_cookie(device.COOKIE, device.issue(sessions.key, name, now), max_age=device.LIFETIME, path=device.PATH,
                    httponly=True, samesite="strict", secure=secure(request))
    return resp


async def logout(request: Request) -> Response:
    """POST /admin/logout: clear the cookie, back to the login form."""
    rt = runtime(request)
    if not console_enabled(rt.config):
        return not_found()
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError:
        body = b""
    fields = form_fields(body, LOGIN_FIELDS) or {}
    if not post_ok(request, fields.get(FIELD), "logout"):
        return message(request, None, _("Form refused"), _("This logout form expired or came from another site: open "
                       "the console again and log out from there."), status=403)
    cookie = request.cookies.get(COOKIE)
    if cookie:
        sessions: Sessions = request.app.state.sessions
        try:
            await sessions.revoke(cookie)
        except (RedisError, OSError):
            return unavailable(request)
    resp = see_other("/admin/")
    resp.delete_cookie(COOKIE, path="/admin", httponly=True, samesite="strict", secure=secure(request))
    return resp


async def login_page(request: Request) -> Response:
    """GET /admin/login: the login form (200), where /admin/ sends a browser that is logged out."""
    if not console_enabled(runtime(request).config):
        return not_found()
    return login_form(request, status=200)


async def admin_root(request: Request) -> Response:
    """GET /admin → /admin/ (404 when the console is disabled)."""
    if not console_enabled(runtime(request).config):
        return not_found()
    return RedirectResponse("/admin/", status_code=308)


ROUTES = [
    Route("/admin", admin_root, methods=["GET"]),
    Route("/admin/login", login, methods=["POST"]),
    Route("/admin/login", login_page, methods=["GET"]),
    Route("/admin/logout", logout, methods=["POST"]),
]
