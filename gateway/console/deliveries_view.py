"""`/admin/deliveries`: the last callbacks of each tenant, one page of the console.

Rationale: docs/design-notes.md, "gateway/console/deliveries_view.py".
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.i18n import _
from gateway.console.render import gate, json_answer, message, page, runtime
from gateway.core.errors import RET_BY_REASON, DependencyUnavailable
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.ops.deliveries import DeliveryLog

MAX_ROWS = 500
DEFAULT_ROWS = 50
OUTCOME_FILTERS = ("", "ok", "failed")  # plus any exact reason of gateway.core.errors.RET_TABLE


def _log(request: Request) -> DeliveryLog:
    log: DeliveryLog = request.app.state.deliveries
    return log


def matches(record: dict[str, Any], outcome: str) -> bool:
    """Outcome filter: '' any, 'ok', 'failed' (anything not ok), or one exact reason."""
    got = record.get("outcome")
    if outcome == "":
        return True
    if outcome == "failed":
        return got != "ok"
    return bool(got == outcome)


def _query(request: Request) -> tuple[str, str, int] | str:
    """(tenant, outcome, n) of the query string, or the message of a filter that is unknown."""
    rt = runtime(request)
    tenant = request.query_params.get("tenant", "")
    outcome = request.query_params.get("outcome", "")
    n_raw = request.query_params.get("n", str(DEFAULT_ROWS))
    if tenant and tenant not in rt.config.tenants:
        return _("Unknown tenant filter.")
    if outcome not in OUTCOME_FILTERS and outcome not in RET_BY_REASON:
        return _("Unknown outcome filter.")
    n = int(n_raw) if n_raw.isdigit() else DEFAULT_ROWS
    return tenant, outcome, max(1, min(MAX_ROWS, n))


async def sections(rt: Runtime, log: DeliveryLog, tenant: str, outcome: str,
                   n: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """(tenant, its last `n` matching records newest first) for `tenant` or every tenant.
    Raises DependencyUnavailable when the record cannot be read."""
    names = [tenant] if tenant else sorted(rt.config.tenants)
    # With an outcome filter read the whole ring, so `n` matching rows can be found.
    fetch = rt.config.admin.keep_deliveries if outcome else n
    out = []
    show = rt.config.admin.show_queries
    for name in names:
        rows = [r for r in await log.recent(name, fetch) if matches(r, outcome)][:n]
        if not show:  # records written while it was on must not leak after it is turned off
            for r in rows:
                r.pop("query", None)
        out.append((name, rows))
    return out


async def deliveries_html(request: Request) -> Response:
    """GET /admin/deliveries: filter form, then one table per tenant."""
    user = await gate(request, "view", active="deliveries")
    rt = runtime(request)
    q = _query(request)
    if isinstance(q, str):
        return message(request, user, _("Deliveries"), q, status=400, back="/admin/deliveries", active="deliveries")
    tenant, outcome, n = q
    error = None
    try:
        found = await sections(rt, _log(request), tenant, outcome, n)
    except DependencyUnavailable:
        found, error = [], _("The deliveries record (Redis) is not answering; try again shortly.")
    outcomes = ["ok", "failed", *(reason for reason in RET_BY_REASON if reason != "success")]
    return page(request, user, "deliveries.html", active="deliveries", title=_("Deliveries"), sections=found,
                tenants=sorted(rt.config.tenants), outcomes=outcomes, tenant=tenant, outcome=outcome, n=n,
                shared=_log(request).shared, error=error)


async def deliveries_json(request: Request) -> Response:
    """GET /admin/deliveries.json?tenant=&outcome=&n=: {"deliveries": [records newest first], "shared"}."""
    await gate(request, "view", as_json=True)
    rt = runtime(request)
    q = _query(request)
    if isinstance(q, str):
        return json_answer({"error": "bad filter"}, 400)
    tenant, outcome, n = q
    try:
        found = await sections(rt, _log(request), tenant, outcome, n)
    except DependencyUnavailable:
        return json_answer({"error": "deliveries record unavailable"}, 503)
    rows = sorted((r for _, rs in found for r in rs), key=lambda r: r.get("received_at") or 0, reverse=True)
    return json_answer({"deliveries": rows[:n], "shared": _log(request).shared})


ROUTES = [
    Route("/admin/deliveries", deliveries_html, methods=["GET"]),
    json_route("/admin/deliveries.json", deliveries_json, ["GET"]),
]
