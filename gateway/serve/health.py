"""`/healthz` (the process answers) and `/readyz` (it can serve, and will after a restart: every
index a route names opens, in this worker and on disk; the replay store answers). Both
`Cache-Control: no-store`."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from gateway.core.errors import DependencyUnavailable
from gateway.core.runtime import Runtime
from indexes.errors import IndexStoreError

NO_STORE = {"cache-control": "no-store"}


async def healthz(request: Request) -> Response:
    """Process alive: always 200 while the event loop answers."""
    return JSONResponse({"status": "ok"}, headers=NO_STORE)


def disk_problem(rt: Runtime, name: str) -> str | None:
    """What is wrong with index `name` on disk in a few words without paths ('missing',
    'damaged', …: `IndexStoreError.reason`), or None when its folder opens afresh
    (`IndexStore.check`, blocking: about 1-2 ms an index)."""
    try:
        rt.indexes.check(name)
    except IndexStoreError as exc:
        return exc.reason
    except OSError:
        return "unreadable"
    return None


async def readyz(request: Request) -> Response:
    """Ready: config loaded, every index a tenant route or an enabled `[agent.routes.*]` entry
    names opens in this worker and its folder opens afresh (so a restarted worker would serve
    it too), Redis answers when configured. 200 {"status": "ready", "problems": []} or 503
    {"status": "not_ready", "problems": [...]}, each problem naming the route or the index:

    - "index kb unavailable (damaged on disk)": this worker cannot open it, its callbacks get 503;
    - "agent route wiki: index w unavailable (missing on disk)": the same for an agent route;
    - "index kb damaged on disk; answers come from the copy opened before": this worker still
      answers from the files it mapped before they were damaged or deleted, but a restarted
      or replaced worker could not (docs/on-call.md, "A damaged or deleted index").
    """
    rt: Runtime = request.app.state.runtime
    routed = {r.index for t in rt.config.tenants.values() for r in t.routes}
    agent = [ar for ar in rt.config.agent.routes.values() if ar.enabled]  # a disabled one answers without searching
    on_disk = {name: await run_in_threadpool(disk_problem, rt, name)
               for name in sorted(routed | {ar.index for ar in agent})}

    def unavailable(name: str) -> str:
        return "unavailable" + (f" ({on_disk[name]} on disk)" if on_disk[name] else "")

    problems: list[str] = []
    opened: set[str] = set()
    named = [(f"index {name}", name) for name in sorted(routed)]
    named += [(f"agent route {ar.name}: index {ar.index}", ar.index) for ar in agent]
    for label, name in named:
        try:
            rt.index(name)
            opened.add(name)
        except DependencyUnavailable:
            problems.append(f"{label} {unavailable(name)}")
    for name in sorted(opened):
        if on_disk[name]:
            problems.append(f"index {name} {on_disk[name]} on disk; answers come from the copy opened before")
    if not await rt.nonces.ping():
        problems.append("replay store unavailable")
    status = 200 if not problems else 503
    return JSONResponse({"status": "ready" if not problems else "not_ready", "problems": sorted(set(problems))},
                        status_code=status, headers=NO_STORE)
