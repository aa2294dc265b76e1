"""`/healthz` (the process answers) and `/readyz` (it can serve: every index a route names
opens, the replay store answers). Both `Cache-Control: no-store`."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.core.errors import DependencyUnavailable
from gateway.core.runtime import Runtime

NO_STORE = {"cache-control": "no-store"}


async def healthz(request: Request) -> Response:
    """Process alive: always 200 while the event loop answers."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


async def readyz(request: Request) -> Response:
    """Ready: config loaded, every index a tenant route or an enabled `[agent.routes.*]` entry
    names opens, Redis answers when configured. 200 {"status": "ready", "problems": []} or 503
    {"status": "not_ready", "problems": [...]}, each problem naming the route."""
    rt: Runtime = request.app.state.runtime
    problems: list[str] = []
    for name in sorted({r.index for t in rt.config.tenants.values() for r in t.routes}):
        try:
            rt.index(name)
        except DependencyUnavailable:
            problems.append(f"index {name} unavailable")
    for ar in rt.config.agent.routes.values():
        if not ar.enabled:
            continue  # answers 'disabled' without searching
        try:
            rt.index(ar.index)
        except DependencyUnavailable:
            problems.append(f"agent route {ar.name}: index {ar.index} unavailable")
    if not await rt.nonces.ping():
        problems.append("replay store unavailable")
    status = 200 if not problems else 503
    return JSONResponse({"status": "ready" if not problems else "not_ready", "problems": sorted(set(problems))},
                        status_code=status, headers=NO_STORE)
