"""`/healthz` (the process answers) and `/readyz` (it can serve: every routed index opens,
the replay store answers). Both `Cache-Control: no-store`."""

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
    """Ready: config loaded, every routed index opens, Redis answers when configured.
    200 {"status": "ready", "problems": []} or 503 {"status": "not_ready", "problems": [...]}."""
    rt: Runtime = request.app.state.runtime
    problems: list[str] = []
    for name in rt.routed_indexes():
        try:
            rt.index(name)
        except DependencyUnavailable:
            problems.append(f"index {name} unavailable")
    if not await rt.nonces.ping():
        problems.append("replay store unavailable")
    status = 200 if not problems else 503
    return JSONResponse({"status": "ready" if not problems else "not_ready", "problems": sorted(set(problems))},
                        status_code=status, headers=NO_STORE)
