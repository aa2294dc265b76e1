"""Which language a console request is answered in, and the switch that chooses it.

Rationale: docs/design-notes.md, "gateway/console/language.py".
"""

from __future__ import annotations

import re
from urllib.parse import urlencode

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.console import i18n
from gateway.console.proxy import secure
from gateway.console.session import console_enabled

COOKIE = "kbgate_lang"
MAX_AGE = 365 * 24 * 3600  # seconds: a choice is remembered for a year
BY_TAG = {tag.lower(): locale for locale, tag in i18n.TAGS.items()}
_PRIMARY = {"zh": "zh_CN", "en": "en"}  # a language the console speaks, by its primary subtag
_NEXT = re.compile(r"/admin(/[A-Za-z0-9._~%/\-]*)?(\?[^\s\\#]*)?")


def from_accept_language(value: str) -> str | None:
    """The locale for an Accept-Language header (RFC 9110: tags with optional q), or None when
    it names no language the console speaks. Malformed entries are skipped, never an error."""
    ranked: list[tuple[float, int, str]] = []
    for i, part in enumerate(value.split(",")[:32]):
        tag, _, params = part.strip().partition(";")
        q = 1.0
        m = re.fullmatch(r"\s*q=([01](?:\.\d{0,3})?)\s*", params) if params else None
        if params and m is None:
            continue
        if m:
            q = float(m.group(1))
        primary = tag.strip().lower().split("-")[0]
        if q > 0 and primary in _PRIMARY:
            ranked.append((-q, i, _PRIMARY[primary]))
    return min(ranked)[2] if ranked else None


def choose(headers: Headers, cookies: dict[str, str], tool: bool = False) -> str:
    """The locale (one of i18n.LOCALES) for a request: the cookie, Accept-Language, then zh_CN
    (en when `tool`)."""
    chosen = BY_TAG.get(cookies.get(COOKIE, "").lower())
    if chosen:
        return chosen
    return from_accept_language(headers.get("accept-language", "")) or ("en" if tool else i18n.DEFAULT)


def is_tool(method: str, path: str, headers: Headers) -> bool:
    """A script rather than a person: a JSON twin (`….json`) or a POST with a Bearer credential."""
    return path.endswith(".json") or (method == "POST" and
                                      headers.get("authorization", "").lower().startswith("bearer "))


class ConsoleLanguage:
    """ASGI middleware: each request under /admin is answered in `choose`'s language."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/admin"):
            request = Request(scope)
            i18n.use(choose(request.headers, request.cookies, is_tool(request.method, scope["path"], request.headers)))
        await self.app(scope, receive, send)


def safe_next(value: str) -> str:
    """`value` when it is a path of this console (no scheme, host, backslash nor dot segment, which
    a browser would resolve out of /admin), else /admin/."""
    path = value.split("?", 1)[0]
    dots = any(part in (".", "..") or part.lower() in ("%2e", "%2e%2e", ".%2e", "%2e.") for part in path.split("/"))
    return value if _NEXT.fullmatch(value) and "//" not in value and not dots else "/admin/"


async def switch(request: Request) -> Response:
    """GET /admin/language?to=zh-CN|en&next=PATH: remember the choice, 303 back to PATH
    (404 when no console is configured, as every console path)."""
    if not console_enabled(request.app.state.runtime.config):
        return Response("Not Found", status_code=404, media_type="text/plain", headers={"cache-control": "no-store"})
    locale = BY_TAG.get(request.query_params.get("to", "").lower())
    resp = RedirectResponse(safe_next(request.query_params.get("next", "")), status_code=303,
                            headers={"cache-control": "no-store"})
    if locale:
        resp.set_cookie(COOKIE, i18n.TAGS[locale], max_age=MAX_AGE, path="/admin", httponly=True, samesite="lax",
                        secure=secure(request))
    return resp


def links(path: str) -> list[dict[str, str]]:
    """The header's language links for the page at `path` (with its query): label, tag, href,
    current (the language now in use)."""
    here = safe_next(path)
    return [{"tag": tag, "label": label, "current": "true" if i18n.TAGS[i18n.current()] == tag else "",
             "href": "/admin/language?" + urlencode({"to": tag, "next": here})}
            for tag, label in (("zh-CN", "中文"), ("en", "English"))]


ROUTES = [Route("/admin/language", switch, methods=["GET"])]
