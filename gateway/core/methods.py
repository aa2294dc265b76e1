"""A JSON 405 for the JSON endpoints that are not behind a wing's own envelope (`/healthz`,
`/readyz`, `/admin/deliveries.json`).

Rationale: docs/design-notes.md, "gateway/core/methods.py".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, request_response
from starlette.types import Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]


class JsonMethods:
    """An ASGI app: `endpoint` for `methods` (HEAD comes with GET), else the JSON 405."""

    def __init__(self, endpoint: Endpoint, methods: Sequence[str] = ("GET",)) -> None:
        allowed = [m.upper() for m in methods]
        if "GET" in allowed and "HEAD" not in allowed:
            allowed.append("HEAD")
        self.allow = allowed
        self.app = request_response(endpoint)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = str(scope.get("method", "GET")).upper()
        if method in self.allow:
            await self.app(scope, receive, send)
            return
        body = {"error": "method_not_allowed",
                "message": f"{method} is not allowed on {scope.get('path', '')}; use {' or '.join(self.allow)}",
                "allow": self.allow}
        await JSONResponse(body, status_code=405, headers={"allow": ", ".join(self.allow),
                                                           "cache-control": "no-store"})(scope, receive, send)


def json_route(path: str, endpoint: Endpoint, methods: Sequence[str] = ("GET",)) -> Route:
    """A Route serving `endpoint` for `methods` whose other methods get the JSON 405.

    Passed as an ASGI app, so Starlette's router hands it every method (its own plain-text
    405 never runs)."""
    return Route(path, JsonMethods(endpoint, methods))
