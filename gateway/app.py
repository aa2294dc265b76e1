"""The ASGI application: app factory, lifespan, routes.

Tenant callback paths come from the config (and may change on reload), so the
top-level app dispatches them itself before handing everything else to a Starlette
router (health, readiness, and later the agent and admin endpoints).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import fields as dataclass_fields

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import agent_access, agent_knowledge, callback
from gateway.admin import ROUTES as ADMIN_ROUTES
from gateway.callback import Delivery
from gateway.clock import SYSTEM_CLOCK
from gateway.config import Config
from gateway.deliveries import DeliveryLog, make_delivery_log, to_record
from gateway.errors import DependencyUnavailable, NotFound
from gateway.keyuse import make_key_usage
from gateway.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from gateway.metrics import Metrics
from gateway.reload import Reloader
from gateway.replay import make_store
from gateway.types import Clock, NonceStore
from gateway.volcengine import error_body
from indexes.errors import IndexStoreError
from indexes.store import IndexStore
from indexes.types import IndexStats

log = logging.getLogger("kbgate.access")

CALLBACK_PREFIX = "/volcengine/"
# What one callback's log line carries: every Delivery field but the query text and extras.
_LOGGED_FIELDS = tuple(f.name for f in dataclass_fields(Delivery) if f.name not in ("query", "extra"))


class Runtime:
    """Everything one worker holds while serving: config, clock, nonce store, indexes.

    `config` may be swapped whole by a reload; handlers read it once per request.
    """

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK, nonces: NonceStore | None = None) -> None:
        self.config = config
        self.clock = clock
        self.nonces: NonceStore = nonces or make_store(
            config.replay.redis_url, config.replay.timeout_seconds, clock
        )
        self.indexes = IndexStore(config.indexes_dir, dense=config.dense)
        self.metrics = Metrics(self.index_stats)
        self.deliveries: DeliveryLog = make_delivery_log(config, on_drop=self.metrics.drop)
        self.access: agent_access.AccessState | None = None  # built on first tool call
        self.key_usage = make_key_usage(config.replay.redis_url, config.replay.key_prefix,
                                        config.replay.timeout_seconds)
        self.reloader = Reloader(self)

    def index(self, name: str):  # type: ignore[no-untyped-def]
        """The named index, reloaded if a new commit landed. Raises DependencyUnavailable."""
        try:
            idx = self.indexes.open(name)
            idx.maybe_reload()
        except (IndexStoreError, OSError, ValueError):
            log.warning("index unavailable", extra={"index": name})
            raise DependencyUnavailable("index_unavailable", f"index {name!r} is not available") from None
        return idx

    def index_stats(self) -> list[tuple[str, IndexStats | None]]:
        """(name, stats or None when it cannot be opened) of every routed index (tenant and
        agent routes), for /metrics."""
        names = sorted({r.index for t in self.config.tenants.values() for r in t.routes}
                       | {r.index for r in self.config.agent.routes.values()})
        out: list[tuple[str, IndexStats | None]] = []
        for name in names:
            try:
                out.append((name, self.index(name).stats()))
            except (DependencyUnavailable, OSError, ValueError):
                out.append((name, None))
        return out

    def record(self, d: Delivery) -> None:
        """After the response was sent: log one JSON line (query text at debug level only),
        count it in the metrics and hand it to the deliveries record. Does no I/O wait."""
        fields = {name: getattr(d, name) for name in _LOGGED_FIELDS}  # asdict() deep-copies: 10x slower
        query = d.query
        level = logging.INFO if d.status < 500 else logging.ERROR
        log.log(level, "callback", extra=fields)
        if query is not None and log.isEnabledFor(logging.DEBUG):
            log.debug("callback query", extra={"request_id": d.request_id, "query": query})
        self.metrics.observe(d)
        try:
            self.deliveries.submit(to_record(d, show_query=self.config.admin.show_queries))
        except Exception:  # fail open: the record is for operators, the answer already left
            log.warning("deliveries record failed", extra={"request_id": d.request_id}, exc_info=True)
        if d.signature == "verified" and d.key_id is not None and d.outcome not in ("replayed", "delivery_pending"):
            self.key_usage.note(d.tenant, d.key_id, d.received_at)

    async def close(self) -> None:
        await self.deliveries.close()
        await self.key_usage.close()
        await self.nonces.close()
        self.metrics.close()
        if self.access is not None:
            await self.access.close()


async def healthz(request: Request) -> Response:
    """Process alive: always 200 while the event loop answers."""
    return JSONResponse({"status": "ok"}, headers={"cache-control": "no-store"})


async def metrics(request: Request) -> Response:
    """Prometheus text exposition of every worker (see gateway.metrics)."""
    rt: Runtime = request.app.state.runtime
    body = await run_in_threadpool(rt.metrics.exposition)  # index stats touch the disk
    return Response(body, media_type=METRICS_CONTENT_TYPE, headers={"cache-control": "no-store"})


async def readyz(request: Request) -> Response:
    """Ready: config loaded, every index a tenant route or an enabled `[agent.routes.*]` entry
    names opens, Redis answers when configured. 503 lists each problem, naming the route."""
    rt: Runtime = request.app.state.runtime
    problems: list[str] = []
    for t in rt.config.tenants.values():
        for r in t.routes:
            try:
                rt.index(r.index)
            except DependencyUnavailable:
                problems.append(f"index {r.index} unavailable")
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
                        status_code=status, headers={"cache-control": "no-store"})


class Gateway:
    """The top-level ASGI app: tenant callback paths first, the Starlette router otherwise."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            watcher = asyncio.get_running_loop().create_task(runtime.reloader.run(), name="kbgate-reload")
            try:
                yield
            finally:
                watcher.cancel()
                await runtime.close()

        routes = [Route("/healthz", healthz), Route("/readyz", readyz), Route("/metrics", metrics), *ADMIN_ROUTES,
                  *agent_knowledge.routes(), *agent_access.routes()]
        self.router = Starlette(routes=routes, lifespan=lifespan)
        self.router.state.runtime = runtime

    async def __call__(self, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            rt = self.runtime
            tenant = rt.config.tenant_at(scope["path"])
            if tenant is not None:
                await callback.handle(rt, tenant, scope, receive, send)
                return
            if scope["path"].startswith(CALLBACK_PREFIX):
                body = error_body(NotFound("tenant_unknown", "no tenant is configured at this path"))
                await send({"type": "http.response.start", "status": 404, "headers": [
                    (b"content-type", b"application/json; charset=utf-8"), (b"cache-control", b"no-store"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
            await self.router(scope, receive, _no_store(send))
            return
        await self.router(scope, receive, send)


def _no_store(send):  # type: ignore[no-untyped-def]
    """Wrap `send` so every response carries Cache-Control: no-store (404s and 405s too):
    nothing this gateway serves may be cached (seed 000: 响应均 no-store)."""

    async def wrapped(message):  # type: ignore[no-untyped-def]
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            if not any(k.lower() == b"cache-control" for k, _ in headers):
                headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
        await send(message)

    return wrapped


def create_app(config: Config, *, clock: Clock = SYSTEM_CLOCK, nonces: NonceStore | None = None) -> Gateway:
    """Build the ASGI app for `config`. clock and nonces are injectable for tests."""
    return Gateway(Runtime(config, clock, nonces))
