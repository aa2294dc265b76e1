"""The ASGI application: the composition root where core, wings and operators' tools meet.

Rationale: docs/design-notes.md, "gateway/serve/app.py".
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from gateway import dify, documents
from gateway.agent import knowledge, tools
from gateway.console import gaps
from gateway.console.asked import make_counts
from gateway.console.keep import keeper_of
from gateway.console.language import ConsoleLanguage
from gateway.console.missing import missing
from gateway.console.once import make_once
from gateway.console.render import Answered, answered
from gateway.console.routes import ROUTES as CONSOLE_ROUTES
from gateway.console.sessions import make_sessions
from gateway.console.throttle import make_throttle
from gateway.core.audit import AuditEvent
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import Config
from gateway.core.events import AnswerLooked, Delivery, HybridSearched, Reranked, SearchAnswered
from gateway.core.methods import json_route
from gateway.core.readiness import route_states
from gateway.core.runtime import Runtime
from gateway.core.types import Clock, NonceStore
from gateway.documents.deleted import purge_every
from gateway.documents.writes import Writes
from gateway.mcp import McpWing
from gateway.ops import metrics
from gateway.ops.deliveries import DeliveryLog, make_delivery_log, to_record
from gateway.serve.health import healthz, readyz
from gateway.serve.reload import Reloader
from gateway.volcengine.handler import VolcengineWing


class Gateway:
    """The top-level ASGI app of one worker: Volcengine paths first, the Starlette router otherwise.

    runtime: the core. metrics, deliveries: the operators' observers of its events (also
    served by /metrics and /admin/). reloader: swaps runtime.config when the file changes.
    freeze_gc: freeze what exists once start-up is done (`gc.freeze`): for a worker process,
    which lives as long as its app (gateway.serve.asgi); an app built in a test process is not.
    """

    freeze_gc = False

    def __init__(self, runtime: Runtime) -> None:
        rt = self.runtime = runtime
        self.metrics = metrics.Metrics(rt.index_stats, routes=lambda: [
            (s.kind, s.route, s.index, s.state == "ok") for s in route_states(rt) if s.state != "disabled"])
        self.deliveries: DeliveryLog = make_delivery_log(rt.config, on_drop=self.metrics.drop)
        self.volcengine = VolcengineWing(rt)
        self.mcp = McpWing(rt, loaded=self._freeze)  # the MCP SDK loads on the first MCP request
        self.reloader = Reloader(rt, on_outcome=self.metrics.count_reload)
        rt.events.subscribe(Delivery, self.metrics.observe)
        rt.events.subscribe(AuditEvent, self.metrics.observe_call)
        rt.events.subscribe(Delivery, self._keep)
        rt.events.subscribe(HybridSearched, self.metrics.observe_hybrid)
        rt.events.subscribe(AnswerLooked, self.metrics.observe_answer)
        rt.events.subscribe(Reranked, self.metrics.observe_rerank)
        self.gaps = gaps.make_recorder(rt, self.metrics.count_question)
        rt.events.subscribe(SearchAnswered, self.gaps.observe)
        self.asked = make_counts(lambda: rt.config, rt.clock.now)  # the console overview's questions per day
        rt.events.subscribe(SearchAnswered, self.asked.observe)
        self.gap_clients = gaps.LazyClients(rt)  # the tracker of "File improvement task"
        self.once = make_once(rt.config)  # what a console POST hands to the page it redirects to
        rt.on_close(self.once.close)
        self.login_throttle = make_throttle(rt.config, rt.clock.now)  # failed console logins
        rt.on_close(self.login_throttle.close)
        self.sessions = make_sessions(rt.config, rt.clock.now)  # console login sessions
        rt.on_close(self.sessions.close)
        self.keeper = keeper_of(rt.config, self.gaps, self.asked, self.sessions)  # admin.state_file, or None
        self.document_writes = Writes(rt)  # one queue per index for the document API and the console
        rt.on_close(self.deliveries.close)
        rt.on_close(self.gap_clients.close)
        rt.on_close(self.gaps.close)
        rt.on_close(self.asked.close)
        rt.on_close(self.metrics.aclose)

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            watcher = asyncio.get_running_loop().create_task(self.reloader.run(), name="kbgate-reload")
            flusher = asyncio.get_running_loop().create_task(self.gaps.run(), name="kbgate-gaps")
            counter = asyncio.get_running_loop().create_task(self.asked.run(), name="kbgate-asked")
            purger = asyncio.get_running_loop().create_task(purge_every(rt), name="kbgate-purge-deleted")
            # Open every routed index now, so a hybrid index's model loads and answers once before
            # the first question (/readyz waits for it: gateway.core.readiness "warming").
            opening = asyncio.get_running_loop().run_in_executor(None, rt.open_routed)
            keeping = asyncio.get_running_loop().create_task(self.keeper.run(), name="kbgate-keep") \
                if self.keeper is not None else None
            # What start-up made (modules, the SDKs' models, the config) lives as long as the
            # worker: out of the collector's sight, so a full collection no longer walks it
            # (gc_collect_main was 2.5% of a TiDB callback's CPU in `make bench`'s profile).
            self._freeze()
            try:
                async with self.mcp.running():  # where the MCP SDK runs once needed (mounted apps get no lifespan)
                    yield
            finally:
                watcher.cancel()
                flusher.cancel()
                counter.cancel()
                purger.cancel()
                await asyncio.wait([opening])  # never close the indexes while they are being opened
                if self.keeper is not None and keeping is not None:
                    keeping.cancel()
                    await self.gaps.flush()
                    await self.asked.flush()
                    await self.keeper.save_now()
                await rt.close()

        routes = [json_route("/healthz", healthz), json_route("/readyz", readyz),
                  Route("/metrics", metrics.endpoint),
                  *CONSOLE_ROUTES, *knowledge.routes(rt), *tools.routes(rt), *dify.routes(rt), *self.mcp.routes(),
                  *documents.routes(rt, self.document_writes)]
        # every /admin request is answered in the language its cookie or Accept-Language asks for
        self.router = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(ConsoleLanguage)],
                                exception_handlers={Answered: answered,  # the console's gate and form checks
                                                    404: missing, 405: missing})  # a console page under /admin
        # Starlette answers a path that differs from a route by a trailing slash with a 307 to
        # an absolute URL built from the Host header (an open redirect behind a proxy that
        # forwards Host). A path no route serves is the documented plain 404; the MCP
        # endpoint takes both `mcp.path` and `mcp.path/` as routes of their own.
        self.router.router.redirect_slashes = False
        self.router.state.runtime = rt
        self.router.state.metrics = self.metrics
        self.router.state.deliveries = self.deliveries
        self.router.state.reloader = self.reloader
        self.router.state.gaps = self.gaps
        self.router.state.gap_clients = self.gap_clients
        self.router.state.document_writes = self.document_writes
        self.router.state.asked = self.asked
        self.router.state.key_usage = self.volcengine.key_usage
        self.router.state.once = self.once
        self.router.state.login_throttle = self.login_throttle
        self.router.state.sessions = self.sessions

    def _freeze(self) -> None:
        """With `freeze_gc`, collect, then freeze what exists: once start-up is done, and again
        for what the MCP SDK made as it loaded (on a worker's first MCP request)."""
        if self.freeze_gc:
            gc.collect()
            gc.freeze()

    def _keep(self, d: Delivery) -> None:
        """The deliveries record's observer (the Query only when admin.show_queries is on)."""
        self.deliveries.submit(to_record(d, show_query=self.runtime.config.admin.show_queries))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if self.volcengine.serves(scope["path"]):
                await self.volcengine(scope, receive, send)
                return
            await self.router(scope, receive, _no_store(send))
            return
        await self.router(scope, receive, send)


def _no_store(send: Send) -> Send:
    """Wrap `send` so every response carries Cache-Control: no-store (404s and 405s too):
    nothing this gateway serves may be cached (Agent知识按需搜索与读取: 响应均 no-store)."""

    async def wrapped(message: Message) -> None:
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
