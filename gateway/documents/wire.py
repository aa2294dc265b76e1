"""The document API's side of the Bearer-token frame: its body cap, its codes, its envelope.

Rationale: docs/design-notes.md, "gateway/documents/wire.py".
"""

from __future__ import annotations

import math
import uuid
from typing import Any

from gateway.core import audit
from gateway.core.errors import AgentError, DocumentError
from gateway.core.frame import Call, Reply, dumps
from gateway.core.runtime import Runtime
from gateway.core.validate import Problem

_PROBLEMS = {"media": "documents.media_unsupported", "too_large": "documents.request_too_large",
             "timeout": "documents.body_timeout"}


class Refused(DocumentError):
    """A request refused for one or more of its documents, each named: items are (id, code,
    message) and become one ErrorObject each; the request's own code is the first's."""

    def __init__(self, code: str, items: list[tuple[str, str, str]]) -> None:
        super().__init__(code, items[0][2])
        self.items = items


def error_object(err: AgentError, doc_id: str | None = None, message: str | None = None,
                 code: str | None = None) -> dict[str, Any]:
    """ErrorObject.json of an error (Agent Access API 技术设计 §12), with the document it names."""
    out: dict[str, Any] = {"code": code or err.code, "message": message or err.message, "retryable": err.retryable,
                           "severity": "error"}
    if doc_id is not None:
        out["id"] = doc_id
    if isinstance(err, DocumentError) and err.retry_after is not None:
        out["retryAfterSeconds"] = err.retry_after
    return out


class DocumentsWire:
    """The frame's Wire for the document API (module doc). rt: the worker's runtime, whose
    current config gives the body cap (documents.max_body_bytes)."""

    wing = "documents"

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt

    @property
    def max_body_bytes(self) -> int:
        return self.rt.config.documents.max_body_bytes

    def invalid(self, problem: Problem) -> DocumentError:
        if problem.kind == "unknown":
            return DocumentError("documents.request_invalid", f"unknown field {problem.key}")
        return DocumentError(_PROBLEMS.get(problem.kind, "documents.request_invalid"), problem.message)

    def method_not_allowed(self, method: str) -> DocumentError:
        return DocumentError("documents.method_not_allowed", f"use {method}")

    def answer(self, call: Call, data: dict[str, Any]) -> Reply:
        return self._result(call.event, 200, "passed", data, [])

    def refuse(self, event: audit.AuditEvent, call: Call | None, err: AgentError) -> Reply:
        if isinstance(err, Refused):
            errors = [error_object(err, i, message, code) for i, code, message in err.items]
        else:
            errors = [error_object(err)]
        headers: dict[str, str] = {}
        if isinstance(err, DocumentError) and err.retry_after is not None:
            headers["retry-after"] = str(math.ceil(err.retry_after))
        if err.code == "documents.method_not_allowed" and call is not None:
            headers["allow"] = "POST" if call.request.url.path.endswith("/batch") else "GET, PUT, DELETE"
        reply = self._result(event, err.status, audit.outcome_of(err.status), None, errors)
        return Reply(reply.status, reply.body, reply.outcome, reply.code, headers)

    def _result(self, event: audit.AuditEvent, http: int, status: str, data: dict[str, Any] | None,
                errors: list[dict[str, Any]]) -> Reply:
        audit_ref = "aud_" + uuid.uuid4().hex
        event.extra["audit_ref"] = audit_ref
        result = {"tool": event.tool, "status": status, "data": data, "errors": errors,
                  "requestId": event.request_id, "auditRef": audit_ref}
        return Reply(http, dumps(result), status, errors[0]["code"] if errors else None)
