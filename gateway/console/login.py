"""Logging in and out of the console, and its front door.

GET  /admin            → 308 /admin/
POST /admin/login      form fields `user` (empty: the admin token) and `token` → cookie, 303 to /admin/;
                       429 with Retry-After after too many failures (gateway.console.throttle)
POST /admin/logout     revokes the session and clears the cookie, 303 to /admin/

With no console configured (gateway.console.session.console_enabled) every path is 404.
"""

from __future__ import annotations

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateway.console.auth import COOKIE
from gateway.console.render import (
    MAX_FORM_BYTES,
    form_fields,
    login_form,
    not_found,
    runtime,
    see_other,
    too_many_fields,
)
from gateway.console.session import console_enabled, cookie_value, user_of
from gateway.console.sessions import LIFETIME as COOKIE_MAX_AGE
from gateway.console.sessions import Sessions
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
            return login_form(request, status=413, text="The form is too large.")
        return login_form(request, status=408, text="The form did not arrive in time.")
    fields = form_fields(body, LOGIN_FIELDS)
    if fields is None:
        return login_form(request, status=400, text=too_many_fields(LOGIN_FIELDS))
    name = fields.get("user", "").strip()
    token = fields.get("token") or None
    throttle: Throttle = request.app.state.login_throttle
    counted = keys(name[:64], request.client.host if request.client else None)
    wait = await throttle.retry_after(counted)
    if wait is not None:
        resp = login_form(request, status=429, name=name[:64],
                          text=f"Too many failed logins: try again in {wait} s.")
        resp.headers["retry-after"] = str(wait)
        return resp
    value = cookie_value(name, token)
    if value is None or await user_of(rt.config, value) is None:
        await throttle.failed(counted)
        return login_form(request, status=401, name=name[:64],
                          text="That user and credential do not match." if name else "That token is not valid.")
    sessions: Sessions = request.app.state.sessions
    try:
        value = await sessions.issue(rt.config, name)
    except (RedisError, ValueError):
        return login_form(request, status=503, name=name[:64],
                          text="Sessions cannot be made now (Redis is not answering): try again shortly.")
    resp = see_other("/admin/")
    resp.set_cookie(COOKIE, value, max_age=COOKIE_MAX_AGE, path="/admin", httponly=True, samesite="strict",
                    secure=request.url.scheme == "https")
    return resp


async def logout(request: Request) -> Response:
    """POST /admin/logout: clear the cookie, back to the login form."""
    if not console_enabled(runtime(request).config):
        return not_found()
    cookie = request.cookies.get(COOKIE)
    if cookie:
        sessions: Sessions = request.app.state.sessions
        try:
            await sessions.revoke(cookie)
        except RedisError:
            return login_form(request, status=503, text="Logging out needs Redis, which is not answering: "
                              "try again shortly.")
    resp = see_other("/admin/")
    resp.delete_cookie(COOKIE, path="/admin", httponly=True, samesite="strict", secure=request.url.scheme == "https")
    return resp


async def admin_root(request: Request) -> Response:
    """GET /admin → /admin/ (404 when the console is disabled)."""
    if not console_enabled(runtime(request).config):
        return not_found()
    return RedirectResponse("/admin/", status_code=308)


ROUTES = [
    Route("/admin", admin_root, methods=["GET"]),
    Route("/admin/login", login, methods=["POST"]),
    Route("/admin/logout", logout, methods=["POST"]),
]
