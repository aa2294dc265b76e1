"""The one request frame of every Bearer-token wing: from an HTTP request to one audited answer.

Rationale: docs/design-notes.md, "gateway/core/frame.py".
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from gateway.core import audit
from gateway.core.bodies import read_json_object
from gateway.core.config import AgentClient, AgentRoute, Config
from gateway.core.errors import AgentError
from gateway.core.principals import authenticate_agent
from gateway.core.runtime import Runtime
from gateway.core.scope import EffectiveScope, Principal
from gateway.core.validate import Fields, Problem

log = logging.getLogger("kbgate.agent")

JSON_HEADERS = {"cache-control": "no-store", "content-type": "application/json; charset=utf-8"}


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer: HTTP status, body bytes, the audit outcome (passed | partial | denied |
    failed), the audit error code (None for a clean pass), extra headers."""

    status: int
    body: bytes
    outcome: str
    code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class Wire(Protocol):
    """What a Bearer-token wing tells the frame about its protocol.

    wing: its name in audit lines and metrics ('agent', 'dify', 'mcp').
    max_body_bytes: the request body cap in bytes. invalid(problem): the wing's error for a
    malformed request (gateway.core.validate.Problem). method_not_allowed(method): the
    wing's 405. answer(call, data): the success reply for the handler's result. refuse(event,
    call, err): the reply for an error (call is None when authentication failed).
    """

    wing: str

    @property
    def max_body_bytes(self) -> int: ...

    def invalid(self, problem: Problem) -> AgentError: ...

    def method_not_allowed(self, method: str) -> AgentError: ...

    def answer(self, call: Call, data: dict[str, Any]) -> Reply: ...

    def refuse(self, event: audit.AuditEvent, call: Call | None, err: AgentError) -> Reply: ...


@dataclass(slots=True)
class Call:
    """One authenticated call: who asks, what they asked, and what the wing resolved.

    cfg: the config as the call began (a reload mid-request changes nothing here).
    body: the JSON body once read (`json_object`). scopes: the (route, effective scope)
    pairs the call resolved, for the answer and the audit. warnings: ErrorObjects to return
    beside a passed or partial result; partial: some route could not serve.
    """

    rt: Runtime
    cfg: Config
    request: Request
    client: AgentClient
    principal: Principal
    event: audit.AuditEvent
    wire: Wire
    body: dict[str, Any] = field(default_factory=dict)
    scopes: list[tuple[AgentRoute, EffectiveScope]] = field(default_factory=list)
    warnings: list[dict[str, Any]] = field(default_factory=list)
    partial: bool = False

    async def json_object(self) -> dict[str, Any]:
        """Read the body: JSON media type, at most `wire.max_body_bytes` bytes within
        server.body_timeout_seconds, a JSON object. Raises the wire's error."""
        h = self.request.headers
        self.body = await read_json_object(self.request.stream(), h.get("content-type"), h.get("content-encoding"),
                                           self.wire.max_body_bytes, self.cfg.server.body_timeout_seconds,
                                           self.wire.invalid)
        return self.body

    def fields(self, data: Mapping[str, Any], at: str = "") -> Fields:
        """Typed getters over `data` (at: its dotted path) raising the wire's error."""
        return Fields(data, at, self.wire.invalid)

    def warn(self, code: str, message: str, *, retryable: bool = False, severity: str = "warning") -> None:
        """Add an ErrorObject {code, message, retryable, severity} to return with the result."""
        self.warnings.append({"code": code, "message": message, "retryable": retryable, "severity": severity})


Handler = Callable[[Call], Awaitable[dict[str, Any]]]


def dumps(obj: object) -> bytes:
    """Compact UTF-8 JSON (every agent answer)."""
    return orjson.dumps(obj)


def endpoint(rt: Runtime, wire: Wire, handler: Handler, *, tool: str | Callable[[Request], str],
             method: str | None = None) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint running `handler` in the frame.

    tool: the audit's tool name, or a function of the request giving it. method: answer any
    other method with the wire's 405 (and an Allow header); None when the route restricts
    methods itself.
    """

    async def serve(request: Request) -> Response:
        cfg = rt.config
        started = time.perf_counter()
        event = audit.AuditEvent(ts=rt.clock.now(), request_id=uuid.uuid4().hex[:16],
                                 tool=tool if isinstance(tool, str) else tool(request),
                                 route=request.path_params.get("route", ""), wing=wire.wing)
        call: Call | None = None
        headers = {**JSON_HEADERS, "x-request-id": event.request_id}
        try:
            if method is not None and request.method != method:
                headers["allow"] = method
                raise wire.method_not_allowed(method)
            client, principal = authenticate_agent(request.headers, cfg.agent)
            event.principal = principal
            call = Call(rt, cfg, request, client, principal, event, wire)
            reply = wire.answer(call, await handler(call))
        except AgentError as err:  # ToolError, AccessDenied and KnowledgeError included
            reply = wire.refuse(event, call, err)
        except Exception:  # a bug: answer 500 without detail, keep the trace in the log
            log.exception("agent internal error", extra={"request_id": event.request_id, "tool": event.tool})
            reply = wire.refuse(event, call, AgentError("internal", "internal error"))
        event.status, event.outcome = reply.status, reply.outcome
        event.code = event.code or reply.code
        event.duration_ms = (time.perf_counter() - started) * 1000.0
        audit.record(cfg.audit, rt.events, event)
        return Response(reply.body, status_code=reply.status, headers={**headers, **reply.headers})

    return serve
