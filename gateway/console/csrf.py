"""CSRF protection of the admin pages' POST forms (stateless, double-submit through the cookie).

Rationale: docs/design-notes.md, "gateway/console/csrf.py".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from gateway.console.auth import COOKIE, bearer
from gateway.console.proxy import scheme, secure

FIELD = "csrf"
LOGIN_COOKIE = "kbgate_login"
_LOGIN_VALUE = re.compile(r"[A-Za-z0-9_-]{43}")


def form_token(token: str, form: str) -> str:
    """The `csrf` value of the form labelled `form` (e.g. 'try') for the admin `token`: 64 hex."""
    return hmac.new(token.encode("utf-8"), b"kbgate-admin-csrf:" + form.encode("utf-8"), hashlib.sha256).hexdigest()


def page_token(request: Request, form: str) -> str:
    """The `csrf` value to render into `form` for this (authenticated) request; '' for a
    Bearer-authenticated one, which needs none."""
    cookie = request.cookies.get(COOKIE)
    return form_token(cookie, form) if cookie and not bearer(request.headers.get("authorization")) else ""


def same_origin(request: Request) -> bool:
    """False when the request's Origin header names an origin other than the one it was sent
    to (scheme, host and port of the Host header; the scheme the client used, behind a trusted
    proxy: gateway.console.proxy); True when it has none (not a browser) or
    'null' (what Chromium sends for a form POSTed from a page served with Referrer-Policy:
    no-referrer, as every admin page is: the csrf value decides then)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return True
    parts = urlsplit(origin)
    return f"{parts.scheme}://{parts.netloc}" == f"{scheme(request)}://{request.headers.get('host', '')}"


def post_ok(request: Request, presented: str | None, form: str) -> bool:
    """True when an authenticated POST of `form` may act: same origin, and either Bearer
    authenticated or carrying the right `csrf` value (compared in constant time)."""
    if not same_origin(request):
        return False
    if bearer(request.headers.get("authorization")):
        return True
    cookie = request.cookies.get(COOKIE)
    if not cookie or not presented:
        return False
    return hmac.compare_digest(presented.encode("ascii", "replace"), form_token(cookie, form).encode("ascii"))


def login_token(request: Request) -> str:
    """The login form's `csrf` value: the browser's LOGIN_COOKIE when it holds a well-formed
    one, else a new random one (`set_login_cookie` sends it)."""
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    return cookie if _LOGIN_VALUE.fullmatch(cookie) else secrets.token_urlsafe(32)


def set_login_cookie(request: Request, response: Response, token: str) -> None:
    """Send `token` as the LOGIN_COOKIE with the login form (module doc)."""
    response.set_cookie(LOGIN_COOKIE, token, max_age=3600, path="/admin", httponly=True, samesite="strict",
                        secure=secure(request))


def login_ok(request: Request, presented: str | None) -> bool:
    """True when a login POST may be checked: no foreign Origin, and its `csrf` field equals its
    LOGIN_COOKIE (constant time)."""
    cookie = request.cookies.get(LOGIN_COOKIE, "")
    if not same_origin(request) or not presented or not _LOGIN_VALUE.fullmatch(cookie):
        return False
    return hmac.compare_digest(presented.encode("ascii", "replace"), cookie.encode("ascii"))
