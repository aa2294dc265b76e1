"""404 and 405 under /admin: a console page in the user's language (JSON to a JSON client or a tool);
every other path keeps the plain answers the gateway's APIs document.

Rationale: docs/design-notes.md, "gateway/console/missing.py".
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from gateway.console.i18n import _
from gateway.console.language import is_tool
from gateway.console.render import json_answer, message, not_found, runtime, wants_json
from gateway.console.session import console_enabled, current_user
from gateway.console.users import ConsoleUser

__all__ = ["missing"]

CONSOLE = "/admin"


def _console_path(path: str) -> bool:
    return path == CONSOLE or path.startswith(CONSOLE + "/")


async def _user(request: Request) -> ConsoleUser | None:
    """The logged-in user for the page's navigation, or None (not logged in, or the login
    cannot be checked now: the page is then shown without navigation)."""
    try:
        return await current_user(request)
    except Exception:  # noqa: BLE001 - throttled, busy or the session store down: no navigation
        return None


async def missing(request: Request, exc: Exception) -> Response:
    """The handler of HTTPException 404 and 405 (Starlette's router raises them). Outside /admin,
    and under /admin when no console is configured (as if absent), Starlette's own plain
    answer; under a configured console, a page saying so with a link to the overview (405 keeps
    its Allow header)."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if not _console_path(request.url.path):
        return PlainTextResponse(exc.detail, status_code=exc.status_code, headers=headers)
    if not console_enabled(runtime(request).config):
        return not_found()
    if wants_json(request) or is_tool(request.method, request.url.path, request.headers):
        return json_answer({"error": "method not allowed" if exc.status_code == 405 else "not found"},
                           exc.status_code, headers)
    if exc.status_code == 405:
        heading, text = _("Method not allowed"), _("This page does not take a %(method)s request.",
                                             method=request.method)
    else:
        heading, text = _("Page not found"), _("The console has no page at this address.")
    answer = message(request, await _user(request), heading, text, status=exc.status_code, back=CONSOLE + "/")
    answer.headers.update(headers)
    return answer
