"""The tool API's wire format (Agent Access API 技术设计 §12, §13): the AgentToolRequest it reads and the
AgentToolResult every answer is, errors included.

Rationale: docs/design-notes.md, "gateway/agent/tools/request.py".
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from gateway.agent.idempotency import CANONICAL_PREFIX, canonical_dedupe_key
from gateway.agent.tools.clients import LazyClients
from gateway.core import audit
from gateway.core.config import AgentRoute
from gateway.core.errors import AccessDenied, AgentError, ToolError
from gateway.core.frame import Call, Reply, dumps
from gateway.core.scope import EffectiveScope
from gateway.core.types import KIB
from gateway.core.validate import Fields, Problem
from indexes.filters import glob_problem

_KEY = re.compile(r"[A-Za-z0-9._:-]{8,128}")
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
WRITE_TOOLS = ("create_feedback", "create_improvement_task")


# What the smallest valid request of each read tool looks like, for the errors of a request
# without a caller or an input (docs/agent-developers.md, "An example request").
_MINIMAL_INPUT = {"search": '{"query": "…"}', "ask": '{"question": "…"}', "get_page": '{"path": "…"}',
                  "get_context": '{"question": "…"}'}


def minimal_request(tool: str) -> str:
    """The smallest valid request of `tool` as JSON text, its input elided for the other tools."""
    return '{"caller": {"type": "agent"}, "input": ' + _MINIMAL_INPUT.get(tool, "{…}") + "}"


def invalid(message: str) -> ToolError:
    """access.request_invalid with `message`."""
    return ToolError("access.request_invalid", message)


@dataclass(slots=True)
class ToolCall:
    """One tool call: the frame's Call, the tool's name, its input object and the worker's
    clients (built on first use: a search never opens the tracker)."""

    call: Call
    tool: str
    input: dict[str, Any]
    clients: LazyClients

    def fields(self, data: dict[str, Any] | None = None, at: str = "input") -> Fields:
        """Typed getters over the input (or a part of it at `at`), raising access.request_invalid."""
        return self.call.fields(self.input if data is None else data, at)


def strings(f: Fields, name: str, *, max_items: int, max_len: int) -> tuple[str, ...] | None:
    """1..max_items strings of 1..max_len characters (duplicates dropped), None when absent."""
    return f.strings(name, max_items=max_items, max_len=max_len,
                     text=f"must be 1 to {max_items} strings of 1 to {max_len} characters")


def globs(f: Fields, name: str, *, max_items: int) -> tuple[str, ...] | None:
    """Path globs of a request: strings (≤ 300 characters) that compile to a path filter."""
    found = strings(f, name, max_items=max_items, max_len=300)
    for i, glob in enumerate(found or ()):
        problem = glob_problem(glob)
        if problem:
            raise invalid(f"{f.key(name)}[{i}] {problem}")
    return found


async def read_request(call: Call, tool: str) -> dict[str, Any]:
    """Read and check an AgentToolRequest. Raises ToolError('access.request_invalid') or
    AccessDenied('access.unauthorized') when caller.id names another client (identity comes
    from the token, never from the body)."""
    body = await call.json_object()
    f = call.fields(body, "request")
    try:
        f.only({"caller", "scope", "input", "idempotencyKey", "dedupeKey", "requestId"})
    except ToolError as exc:  # e.g. {"question": …} beside the caller instead of inside "input"
        raise invalid(f"{exc.message}; a minimal request: {minimal_request(tool)}") from None
    caller = body.get("caller")
    if not isinstance(caller, dict) or caller.get("type") not in ("agent", "system"):
        raise invalid(f"caller.type must be 'agent' or 'system'; a minimal request: {minimal_request(tool)}")
    call.fields(caller, "caller").only({"type", "id"})
    if "id" in caller and caller["id"] != call.client.id:
        raise AccessDenied("access.unauthorized", "caller.id does not match the Bearer token")
    if not isinstance(body.get("input"), dict):
        raise invalid(f"input must be an object; a minimal request: {minimal_request(tool)}")
    scope = f.table("scope")
    scope.only({"routes", "paths", "datasets", "includeWorkingDocs"})
    strings(scope, "routes", max_items=16, max_len=64)
    strings(scope, "datasets", max_items=32, max_len=128)
    globs(scope, "paths", max_items=32)
    scope.boolean("includeWorkingDocs", False)
    for k in ("idempotencyKey", "dedupeKey"):
        if k in body and (not isinstance(body[k], str) or not _KEY.fullmatch(body[k])):
            raise invalid(f"{k} must be 8 to 128 of A-Z a-z 0-9 . _ : -")
    if "requestId" in body and (not isinstance(body["requestId"], str) or not _REQUEST_ID.fullmatch(body["requestId"])):
        raise invalid("requestId must be 1 to 128 of A-Z a-z 0-9 . _ : -")
    if tool in WRITE_TOOLS and "dedupeKey" not in body:
        raise invalid("dedupeKey is required for write tools (Agent Access API 技术设计 §9.5)")
    if (tool in WRITE_TOOLS and body["dedupeKey"].startswith(CANONICAL_PREFIX)
            and body["dedupeKey"] != canonical_dedupe_key(tool, body["input"])):
        # 'sha256:' keys mean "this content" (gateway.agent.idempotency): one that is not this
        # payload's hash would fold this feedback into a record of other content.
        raise invalid("a dedupeKey starting with 'sha256:' must be this input's canonical hash "
                      "(gateway.agent.idempotency.canonical_dedupe_key); send that, or a key of your own "
                      "without the prefix")
    return body


def public_scope(scopes: list[tuple[AgentRoute, EffectiveScope]]) -> dict[str, Any] | None:
    """EffectiveScope.json of the resolved routes (None before resolution)."""
    if not scopes:
        return None
    excluded: list[str] = []
    for _, eff in scopes:
        excluded += [g for g in eff.filter.exclude_path_globs if g not in excluded]
    return {
        "routes": [{"route": r.name,
                    "datasets": list(e.filter.datasets) if e.filter.datasets is not None else None,
                    "paths": list(e.filter.path_globs) if e.filter.path_globs is not None else None}
                   for r, e in scopes],
        "includeWorkingDocs": all(e.include_working_docs for _, e in scopes),
        "excludedPaths": excluded,
    }


def error_object(err: AgentError) -> dict[str, Any]:
    """ErrorObject.json of an error: code, message, retryable, severity, retryAfterSeconds?"""
    out: dict[str, Any] = {"code": err.code, "message": err.message, "retryable": err.retryable,
                           "severity": "error"}
    if isinstance(err, ToolError) and err.retry_after is not None:
        out["retryAfterSeconds"] = err.retry_after
    return out


class ToolsWire:
    """The tool API's side of the frame: 32 KiB bodies (access.request_too_large beyond),
    access.request_invalid, AgentToolResult."""

    wing = "agent"
    max_body_bytes = 32 * KIB

    def invalid(self, problem: Problem) -> ToolError:
        if problem.kind == "too_large":  # 413, as every other caller answers an oversized body
            return ToolError("access.request_too_large", f"the request body {problem.text}")
        if problem.kind == "unknown":
            return invalid(f"unknown field {problem.key}")
        return invalid(problem.message)

    def method_not_allowed(self, method: str) -> ToolError:
        return ToolError("access.method_not_allowed", f"use {method}")

    def answer(self, call: Call, data: dict[str, Any]) -> Reply:
        errors = call.warnings
        if call.partial:
            return self._result(call.event, call, 200, "partial", data, errors)
        if any(w["severity"] == "error" for w in errors):
            return self._result(call.event, call, 200, "failed", None, errors)
        return self._result(call.event, call, 200, "passed", data, errors)

    def refuse(self, event: audit.AuditEvent, call: Call | None, err: AgentError) -> Reply:
        http = err.status if err.status != 200 else 400
        return self._result(event, call, http, "denied" if http in (401, 403) else "failed", None,
                            [error_object(err)])

    def _result(self, event: audit.AuditEvent, call: Call | None, http: int, status: str,
                data: dict[str, Any] | None, errors: list[dict[str, Any]]) -> Reply:
        scopes = call.scopes if call is not None else []
        audit_ref = "aud_" + uuid.uuid4().hex
        result = {"tool": event.tool.removeprefix("access."), "status": status, "data": data, "errors": errors,
                  "scope": public_scope(scopes), "requestId": event.extra.get("caller_request_id", event.request_id),
                  "auditRef": audit_ref}
        event.route = ",".join(r.name for r, _ in scopes)
        if scopes:
            event.scope = {"routes": [e.summary() for _, e in scopes]}
        elif call is not None and isinstance(call.body.get("scope"), dict):
            requested = call.body["scope"]  # what was refused: route names, globs, datasets (no text)
            event.scope = {"requested": {k: requested[k] for k in ("routes", "paths", "datasets",
                                                                     "includeWorkingDocs") if k in requested}}
        event.extra["audit_ref"] = audit_ref
        return Reply(http, dumps(result), status, errors[0]["code"] if errors else None)
