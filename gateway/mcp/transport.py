"""The MCP endpoint as an ASGI app: everything kbgate checks before the MCP SDK sees a request,
and the audit line and metrics event after it answered.

Rationale: docs/design-notes.md, "gateway/mcp/transport.py".
"""

from __future__ import annotations

import ipaddress
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio
import orjson
from anyio.abc import TaskGroup, TaskStatus
from starlette.datastructures import Headers
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from gateway import __version__
from gateway.core import audit
from gateway.core.bodies import asgi_chunks, json_media_problem, read_limited
from gateway.core.config import Config
from gateway.core.errors import AccessDenied, AgentError, McpError
from gateway.core.principals import authenticate_agent
from gateway.core.runtime import Runtime
from gateway.core.validate import Problem
from gateway.mcp.tools import CALL_KEY, GRANTS, McpCall

if TYPE_CHECKING:  # the SDK is imported when a request first needs it (McpWing.manager)
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger("kbgate.mcp")

INVALID_REQUEST, INTERNAL_ERROR = -32600, -32603  # JSON-RPC 2.0 §5.1 error codes

# JSON-RPC methods a client sends (any other is labelled "other" in metrics: bounded labels).
METHODS = frozenset({"initialize", "notifications/initialized", "ping", "server/discover", "tools/list",
                     "tools/call", "notifications/cancelled", "resources/list", "prompts/list"})
TOOL_CALL_LABELS = frozenset({*GRANTS.values(), "mcp.unknown"})
_TOKEN_LIST = re.compile(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*")
_PREFLIGHT_HEADERS = "authorization, content-type, accept, mcp-protocol-version, mcp-method, mcp-name, last-event-id"


class McpWing:
    """The MCP endpoint of one worker. rt: the core. `routes()` for the router, `running()`
    for the application's lifespan (the SDK's session manager runs there: a mounted app's
    lifespan would never run). loaded: called once the SDK has started (its modules imported).
    The SDK is imported, and its session manager started, by the first request that reaches it."""

    def __init__(self, rt: Runtime, loaded: Callable[[], None] | None = None) -> None:
        self.rt = rt
        self.path = rt.config.mcp.path
        self._loaded = loaded
        self._manager: StreamableHTTPSessionManager | None = None
        self._started = False  # the manager's run() holds its task group in `_group`
        self._group: TaskGroup | None = None  # while the lifespan runs
        self._starting: anyio.Lock | None = None

    def routes(self) -> list[Route]:
        """`mcp.path` and `mcp.path/`, every method, to this app (it answers 405 itself)."""
        return [Route(self.path, self), Route(self.path + "/", self)]

    @property
    def manager(self) -> StreamableHTTPSessionManager:
        """The SDK's session manager: the SDK imported and the manager built on first use
        (gateway.mcp.server); started by `_ready`."""
        if self._manager is None:
            from gateway.mcp.server import build_server, session_manager
            self._manager = session_manager(build_server(__version__), self.rt.config.mcp)
        return self._manager

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """For the worker's lifetime: the task group the session manager runs in once started
        (`_ready`); on exit that one is stopped, a worker that never started it has none."""
        async with anyio.create_task_group() as group:
            self._group, self._starting = group, anyio.Lock()
            try:
                yield
            finally:
                self._group = None
                self._manager, self._started = None, False  # run() works once per manager
                group.cancel_scope.cancel()

    async def _ready(self) -> StreamableHTTPSessionManager:
        """The session manager, running: the first call starts it in the lifespan's task group
        and concurrent first calls wait for that one start. Raises RuntimeError outside the
        lifespan (a 500, as the SDK's own refusal to serve without run() was)."""
        if not self._started:
            group, starting = self._group, self._starting
            if group is None or starting is None:
                raise RuntimeError("the MCP wing serves only while the application's lifespan runs")
            async with starting:
                if not self._started:
                    # importing the SDK takes about half a second: in a thread, so this worker's
                    # other requests go on meanwhile
                    manager = await anyio.to_thread.run_sync(lambda: self.manager)
                    try:
                        await group.start(_run, manager)
                    except BaseException:
                        self._manager = None  # a cancelled or failed start: the next request builds another
                        raise
                    self._started = True
                    if self._loaded is not None:
                        self._loaded()
        return self.manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        cfg = self.rt.config
        started = time.perf_counter()
        event = audit.AuditEvent(ts=self.rt.clock.now(), request_id=uuid.uuid4().hex[:16], tool="mcp", route="",
                                 wing="mcp")
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        allowed = origin is None or origin_allowed(origin, cfg.mcp.allowed_origins)
        out = _Answer(send, event.request_id, origin if origin is not None and allowed else None)
        call: McpCall | None = None
        refused: AgentError | None = None
        try:
            if not allowed:
                raise McpError("mcp.origin_forbidden", "the Origin is not allowed")
            if scope["method"] == "OPTIONS" and origin is not None:
                event.tool = "preflight"
                await out.preflight(headers)
            else:
                if scope["method"] != "POST":
                    raise McpError("mcp.method_not_allowed", "use POST")
                client, event.principal = authenticate_agent(headers, cfg.agent)
                if cfg.mcp.allowed_hosts and not host_allowed(headers.get("host"), cfg.mcp.allowed_hosts,
                                                              str(scope.get("scheme", "http"))):
                    raise McpError("mcp.host_misdirected", "Invalid Host header")
                body = await _body(headers, receive, cfg)
                event.tool = _label(body)
                msg = shape_refusal(body)
                manager = await self._ready()  # the SDK, loaded by the first request that gets here
                if msg is not None:
                    message_refusal(msg)
                call = McpCall(self.rt, cfg, client, event.principal, event)
                scope[CALL_KEY] = call
                await manager.handle_request(scope, _replay(body, receive), out)
        except AgentError as err:
            refused = err
        except Exception:  # a bug: a 500 without detail, the trace in the log
            log.exception("mcp internal error", extra={"request_id": event.request_id})
            refused = AgentError("internal", "internal error")
        if refused is not None and not out.started:
            await out.refuse(refused, headers)
        event.duration_ms = ((out.sent_at or time.perf_counter()) - started) * 1000.0
        self._finish(event, out.status, refused, call, cfg)

    def _finish(self, event: audit.AuditEvent, status: int, refused: AgentError | None, call: McpCall | None,
                cfg: Config) -> None:
        """Settle the audit event: status, outcome and code (ours, the tool's, or the SDK's
        refusal); write it for a tool call or a refused request; publish it."""
        event.status = status
        if refused is not None:
            event.outcome, event.code = audit.outcome_of(refused.status), refused.code
        elif call is None or not call.handled:
            if status >= 400 or event.tool in TOOL_CALL_LABELS:
                event.outcome, event.code = audit.outcome_of(max(status, 400)), "mcp.request_invalid"
        if event.tool in TOOL_CALL_LABELS or status >= 400:
            audit.record(cfg.audit, self.rt.events, event)  # the line, and the per-wing metrics
        else:
            self.rt.events.publish(event)  # initialize, tools/list, …: counted, not audited


async def _run(manager: StreamableHTTPSessionManager, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
               ) -> None:
    """The session manager's `run()`, until the task group holding it is cancelled."""
    async with manager.run():
        task_status.started()
        await anyio.sleep_forever()


DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST_HEADER = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._~!$&'()*+,;=%-]+)(?::(\d{1,5}|\*))?")


def _host_port(value: str) -> tuple[str, str | None] | None:
    """(host in a canonical form, port or '*' or None) of a Host value or an allowed_hosts
    entry; None when it is not one. Canonical: lower case, one trailing '.' dropped, an IPv6
    literal as its compressed address in brackets (RFC 9110 §4.2.3: the host is
    case-insensitive; RFC 5952 for the address)."""
    m = _HOST_HEADER.fullmatch(value.strip())
    if m is None:
        return None
    host, port = m.group(1).lower(), m.group(2)
    if host.startswith("["):
        try:
            host = f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        except ValueError:
            return None
    elif host.endswith(".") and len(host) > 1:
        host = host[:-1]
    return host, port


def host_allowed(host: str | None, allowed: tuple[str, ...], scheme: str) -> bool:
    """Is the request's Host header (`host`, None when absent) one of mcp.allowed_hosts?

    Host names compare case-insensitively, IPv6 literals as addresses; a port equal to the
    default port of the request's `scheme` (80 for http, 443 for https) counts as no port, so
    an entry without a port matches the host with its default port and 'kb.example.com:443'
    matches 'kb.example.com' over https; an entry with ':*' matches any port or none. Any other
    port must be equal. The SDK's own check (mcp.server.transport_security) compares strings."""
    got = _host_port(host) if host is not None else None
    if got is None:
        return False
    default = str(DEFAULT_PORTS.get(scheme, ""))
    name, port = got[0], (None if got[1] == default else got[1])
    if port == "*":
        return False
    for entry in allowed:
        want = _host_port(entry)
        if want is None or want[0] != name:
            continue
        if want[1] == "*" or (None if want[1] == default else want[1]) == port:
            return True
    return False


def origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    """Is `origin` listed: exactly, or by a 'scheme://host:*' entry with any port (the rule
    of the SDK's own check, mcp.server.transport_security)."""
    for a in allowed:
        if origin == a:
            return True
        if a.endswith(":*") and origin.startswith(a[:-1]) and origin[len(a) - 1:].isdigit():
            return True
    return False


def _invalid(problem: Problem) -> McpError:
    if problem.kind == "too_large":
        return McpError("mcp.body_too_large", f"the body {problem.text}")
    if problem.kind == "timeout":
        return McpError("mcp.body_timeout", f"the body {problem.text}")
    return McpError("mcp.media_unsupported", f"{problem.key} {problem.text}")


async def _body(headers: Headers, receive: Receive, cfg: Config) -> bytes:
    """The whole body: Content-Type application/json (MCP's Streamable HTTP requires it),
    identity encoding, at most mcp.max_body_bytes within server.body_timeout_seconds."""
    content_type = headers.get("content-type")
    problem = json_media_problem(content_type, headers.get("content-encoding"))
    if problem is None and (content_type is None or content_type.partition(";")[0].strip().lower()
                            != "application/json"):
        problem = Problem("Content-Type", "media", "must be application/json")
    if problem is not None:
        raise _invalid(problem)
    return await read_limited(asgi_chunks(receive), cfg.mcp.max_body_bytes, cfg.server.body_timeout_seconds,
                              _invalid)


def _label(body: bytes) -> str:
    """The request's label for audit and metrics: the tool's grant for a tools/call
    ('mcp.search', 'mcp.fetch', 'mcp.unknown'), else the JSON-RPC method, 'other' when it
    is none we know or the body is not a JSON-RPC object (the SDK answers those)."""
    try:
        msg = orjson.loads(body)
    except orjson.JSONDecodeError:
        return "other"
    method = msg.get("method") if isinstance(msg, dict) else None
    if method == "tools/call":
        params = msg.get("params")
        name = params.get("name") if isinstance(params, dict) else None
        return GRANTS.get(name, "mcp.unknown") if isinstance(name, str) else "mcp.unknown"
    return method if isinstance(method, str) and method in METHODS else "other"


def shape_refusal(body: bytes) -> dict[str, object] | None:
    """Refuse, before the SDK, the JSON-RPC shapes it mishandles. Raises McpError:
    mcp.batch_unsupported for a JSON array (the SDK answered pydantic's validation text; MCP
    2025-06-18 removed JSON-RPC batching), mcp.request_id_invalid for an `id` that is neither
    a string nor an integer (MCP's RequestId; an object id got a 202 with no body), or a
    request (`method` present) whose id is null; mcp.request_invalid for JSON that is not an
    object. Returns the message for `message_refusal`; None for unparsable JSON, the SDK's
    to answer (-32700)."""
    try:
        msg = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if isinstance(msg, list):
        raise McpError("mcp.batch_unsupported", "batch requests are not supported")
    if not isinstance(msg, dict):
        raise McpError("mcp.request_invalid", "Invalid Request: a JSON-RPC message must be an object")
    if "id" in msg:
        ident = msg["id"]
        if ident is None and "method" in msg:
            raise McpError("mcp.request_id_invalid", "Invalid Request: a request's id must not be null")
        if ident is not None and (isinstance(ident, bool) or not isinstance(ident, str | int)):
            raise McpError("mcp.request_id_invalid", "Invalid Request: id must be a string or an integer")
    return msg


def message_refusal(msg: dict[str, object]) -> None:
    """Raise McpError mcp.request_invalid, with a one-line message, for an object that is not a
    JSON-RPC message the SDK accepts (`params` not an object...: the SDK answered pydantic's
    ~1 KB text, the input echoed). The SDK's own validation decides: mcp_types, loaded by
    then (McpWing._ready). Like `shape_refusal`'s, a JSON-RPC -32600 with id null."""
    import mcp_types
    from pydantic import ValidationError

    try:
        mcp_types.jsonrpc_message_adapter.validate_python(msg, by_name=False)
        return
    except ValidationError:
        pass
    problem = "not a JSON-RPC request, notification, response or error"  # in a few words naming the member
    if msg.get("jsonrpc") != "2.0":
        problem = 'jsonrpc must be "2.0"'
    elif "method" in msg and not isinstance(msg["method"], str):
        problem = "method must be a string"
    elif "method" in msg and msg.get("params") is not None and not isinstance(msg["params"], dict):
        problem = "params must be an object"
    raise McpError("mcp.request_invalid", f"Invalid Request: {problem}")


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands the SDK the body already read, then waits on the real one (a
    disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


class _Answer:
    """The response side: adds x-request-id, no-store and (for an allowed Origin) CORS to
    whatever is sent, remembers the status; answers refusals and preflights itself."""

    def __init__(self, send: Send, request_id: str, origin: str | None) -> None:
        self._send = send
        self.request_id = request_id
        self.origin = origin
        self.status = 0
        self.started = False
        self.sent_at: float | None = None  # perf_counter() when the last body part left

    def _extra(self) -> list[tuple[bytes, bytes]]:
        out = [(b"x-request-id", self.request_id.encode()), (b"cache-control", b"no-store")]
        if self.origin is not None:
            out += [(b"access-control-allow-origin", self.origin.encode("latin-1")), (b"vary", b"Origin"),
                    (b"access-control-expose-headers", b"mcp-session-id, x-request-id, www-authenticate")]
        return out

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
            self.status = int(message["status"])
            keep = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"cache-control"]
            message = {**message, "headers": keep + self._extra()}
        await self._send(message)
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            self.sent_at = time.perf_counter()

    async def _respond(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        length = [] if status == 204 else [(b"content-length", str(len(body)).encode())]  # RFC 9110 §8.6
        await self({"type": "http.response.start", "status": status, "headers": [*length, *headers]})
        await self({"type": "http.response.body", "body": body})

    async def refuse(self, err: AgentError, request_headers: Headers) -> None:
        """A JSON-RPC error (id null) with the HTTP status of `err`; 405 with Allow, 401 with
        WWW-Authenticate (RFC 6750 §3: error="invalid_token" only when a Bearer token was sent,
        another scheme or none is no token; its description is the body's message)."""
        code = INTERNAL_ERROR if err.status >= 500 else INVALID_REQUEST
        body = orjson.dumps({"jsonrpc": "2.0", "id": None, "error": {
            "code": code, "message": err.message, "data": {"code": err.code, "retryable": err.retryable}}})
        headers = [(b"content-type", b"application/json")]
        if err.status == 405:
            headers.append((b"allow", b"POST"))
        if isinstance(err, AccessDenied) and err.status == 401:
            challenge = 'Bearer realm="kbgate"'
            scheme, _, token = request_headers.get("authorization", "").strip().partition(" ")
            if scheme.lower() == "bearer" and token.strip():  # a token sent: the body's reason, in its words
                challenge += f', error="invalid_token", error_description="{err.message}"'
            headers.append((b"www-authenticate", challenge.encode()))
        await self._respond(err.status, body, headers)

    async def preflight(self, request_headers: Headers) -> None:
        """A CORS preflight from an allowed Origin: 204, POST with the headers it asks for."""
        asked = request_headers.get("access-control-request-headers", "")
        allow = asked if asked and _TOKEN_LIST.fullmatch(asked.strip()) else _PREFLIGHT_HEADERS
        await self._respond(204, b"", [(b"access-control-allow-methods", b"POST"),
                                       (b"access-control-allow-headers", allow.strip().encode()),
                                       (b"access-control-max-age", b"600")])
