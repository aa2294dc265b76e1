"""`/admin/`: the console's first page, an overview of every route."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.render import gate, page, see_other

LEGACY_FILTERS = ("tenant", "outcome", "n")  # /admin/?tenant=… was the deliveries page


async def overview_html(request: Request) -> Response:
    """GET /admin/."""
    user = await gate(request, "view", active="overview")
    if isinstance(user, Response):
        return user
    if any(k in request.query_params for k in LEGACY_FILTERS):
        return see_other("/admin/deliveries?" + str(request.query_params))
    return page(request, user, "not_yet.html", active="overview", title="Overview", heading="Overview",
                meanwhile="See Deliveries, Gaps and Try in the navigation.")


ROUTES = [Route("/admin/", overview_html, methods=["GET"])]
