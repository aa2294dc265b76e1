"""`/admin/`: the console's first page, an overview of every route.

Rationale: docs/design-notes.md, "gateway/console/overview.py".
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.chart import questions_svg
from gateway.console.i18n import _
from gateway.console.overview_data import overview
from gateway.console.render import SECURITY_HEADERS, Answered, gate, json_answer, page, runtime, see_other
from gateway.console.session import presented
from gateway.core.methods import json_route

LEGACY_FILTERS = ("tenant", "outcome", "n")  # /admin/?tenant=… was the deliveries page


async def _values(request: Request) -> dict[str, Any]:
    state = request.app.state
    values = await overview(runtime(request), state.asked, state.key_usage, state.deliveries)
    metrics = getattr(state, "metrics", None)
    values["hybrid"] = {index: {"hybrid": per.get("hybrid", 0),
                                "lexical": sum(n for outcome, n in per.items() if outcome != "hybrid")}
                        for index, per in (metrics.hybrid_outcomes() if metrics is not None else {}).items()}
    return values


async def overview_html(request: Request) -> Response:
    """GET /admin/ (no credential: 303 to the login page, GET /admin/login, so a monitor sees a
    redirect; a credential that is not valid gets the login form, 401, saying so)."""
    try:
        user = await gate(request, "view", active="overview")
    except Answered as refused:
        answer = refused.response
        if answer.status_code == 401 and answer.media_type != "application/json" and presented(request) is None:
            return see_other("/admin/login")  # no credential at all: a monitor, a fresh browser
        raise
    if any(k in request.query_params for k in LEGACY_FILTERS):
        return see_other("/admin/deliveries?" + str(request.query_params))
    return page(request, user, "overview.html", active="overview", title=_("Overview"), o=await _values(request))


async def overview_json(request: Request) -> Response:
    """GET /admin/overview.json."""
    await gate(request, "view", as_json=True)
    return json_answer(await _values(request))


async def chart_svg(request: Request) -> Response:
    """GET /admin/overview/chart.svg."""
    await gate(request, "view", as_json=True)
    values = await _values(request)
    narrow = request.query_params.get("narrow") == "1"
    return Response(questions_svg(values["questions"], narrow), media_type="image/svg+xml; charset=utf-8",
                    headers=SECURITY_HEADERS)


ROUTES = [Route("/admin/", overview_html, methods=["GET"]), json_route("/admin/overview.json", overview_json, ["GET"]),
          Route("/admin/overview/chart.svg", chart_svg, methods=["GET"])]
