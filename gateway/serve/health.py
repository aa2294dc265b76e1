"""`/healthz` (the process answers) and `/readyz` (this replica can serve: the rule of
`server.readiness`, gateway/core/readiness.py). Both `Cache-Control: no-store`."""

from __future__ import annotations

import datetime as dt

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.core.config import Config
from gateway.core.readiness import is_ready, keyless_tenants, problem_lines, route_states, vector_notes
from gateway.core.runtime import Runtime
from gateway.serve.reload import Reloader

NO_STORE = {"cache-control": "no-store"}


async def healthz(request: Request) -> Response:
    """Process alive: always 200 while the event loop answers."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


async def readyz(request: Request) -> Response:
    """200 when ready by `server.readiness` ("any": Redis answers when configured and at least
    one enabled route can serve; "all": every enabled route's index opens in this worker and
    on disk), else 503. The body, either way:

        {"status": "ready" | "not_ready", "readiness": "any" | "all",
         "problems": ["route acme a/b: index kb unavailable (missing on disk)", ...],
         "routes": [{"kind", "route", "index", "state", "problem", "commit"}, ...],
         "notes": ["tenant acme has no key that verifies: every callback is refused (Ret 40105); ...",
                   "index kb is lexical: built before hybrid was the default, ...; add them with ...", ...],
         "config": {"file", "serving": "file" | "previous", "last_refusal": {...} | null},
         "tenants": [{"tenant", "verify": as configured, "mode": "enforce" | "report" as verified
                      now, "report_until": "2026-01-31T18:00:00Z" | null}, ...]}

    problems: `problem_lines`, plus "replay store unavailable" when Redis does not answer
    PING. routes: every tenant and agent route (`RouteState.as_json`; commit: the commit of its
    index this worker serves, the same label on every replica serving it). config: the last
    refused reload of this worker (`Reloader.config_state`); a refusal never makes it unready,
    since the running config keeps serving. notes: `keyless_tenants`, each tenant with no key
    that verifies, then `vector_notes`, the one-line next step of each routed index that serves
    lexically for want of vectors (neither makes the replica unready).
    """
    rt: Runtime = request.app.state.runtime
    states = await run_in_threadpool(route_states, rt)
    replay_answers = await rt.nonces.ping()
    problems = problem_lines(states) + ([] if replay_answers else ["replay store unavailable"])
    mode = rt.config.server.readiness
    ready = is_ready(states, mode, replay_answers)
    reloader: Reloader | None = getattr(request.app.state, "reloader", None)
    body = {"status": "ready" if ready else "not_ready", "readiness": mode, "problems": problems,
            "routes": [s.as_json() for s in states],
            "notes": [line for _, line in keyless_tenants(rt)] + await run_in_threadpool(vector_notes, rt),
            "config": reloader.config_state() if reloader is not None else None,
            "tenants": tenant_modes(rt.config, rt.clock.now())}
    return JSONResponse(body, status_code=200 if ready else 503, headers=NO_STORE)


def tenant_modes(config: Config, now: float) -> list[dict[str, str | None]]:
    """/readyz's "tenants": each tenant's verify mode as configured and as verified at `now`
    (unix s; a report mode past its report_until verifies as enforce), sorted by name."""
    return [{"tenant": t.name, "verify": t.verify, "mode": t.mode(now),
             "report_until": None if t.report_until is None else
             dt.datetime.fromtimestamp(t.report_until, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
            for t in sorted(config.tenants.values(), key=lambda t: t.name)]
