"""Console pages not built yet: each answers a clear "not yet" page in the layout, so the one
navigation never leads to a 404. A page that lands replaces its entry here."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.render import gate, page

# key (nav), path, heading, what to use meanwhile
PENDING: tuple[tuple[str, str, str, str], ...] = ()


def _handler(key: str, heading: str, meanwhile: str) -> Callable[[Request], Awaitable[Response]]:
    async def not_yet(request: Request) -> Response:
        user = await gate(request, "view", active=key)
        return page(request, user, "not_yet.html", active=key, title=heading, heading=heading, meanwhile=meanwhile)
    return not_yet


ROUTES = [Route(path, _handler(key, heading, meanwhile), methods=["GET"])
          for key, path, heading, meanwhile in PENDING]
