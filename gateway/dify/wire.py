"""Dify's side of the Bearer-token frame: its body cap, its error codes and its envelopes.

Rationale: docs/design-notes.md, "gateway/dify/wire.py".
"""

from __future__ import annotations

from typing import Any

from gateway.core import audit
from gateway.core.errors import AccessDenied, AgentError, BadCredentials, DifyError
from gateway.core.frame import Call, Reply, dumps
from gateway.core.types import KIB
from gateway.core.validate import Problem, clip

_PROBLEMS = {"media": "dify.media_unsupported", "too_large": "dify.body_too_large", "timeout": "dify.body_timeout"}


def as_dify(err: AgentError, knowledge_id: str | None = None) -> DifyError:
    """Any error of the frame or the core as Dify's: a malformed Authorization header 1001, an
    unknown key or a missing grant 1002, a route the key may not read (or that does not
    exist: one answer for both, so a key cannot probe route names) 2001, anything else 5000."""
    if isinstance(err, DifyError):
        return err
    if isinstance(err, BadCredentials):
        if err.malformed:
            return DifyError("dify.authorization_malformed", f"{err.message}: send 'Authorization: Bearer <API key>'")
        return DifyError("dify.authorization_failed", "authorization failed: the API key is not valid")
    if isinstance(err, AccessDenied):
        if err.code == "access.forbidden_tool":
            return DifyError("dify.authorization_failed", "authorization failed: this API key is not granted "
                                                          "dify.retrieval")
        if err.code in ("access.forbidden_scope", "access.dataset_not_allowed"):
            named = f"knowledge_id {clip(knowledge_id, 64)!r}" if knowledge_id else "the knowledge"
            return DifyError("dify.knowledge_unknown", f"{named} is not a knowledge base of this API key "
                                                       f"({err.message})")
        return DifyError("dify.authorization_failed", f"authorization failed: {err.message}")
    return DifyError("dify.internal")


class DifyWire:
    """The frame's Wire for Dify: 64 KiB bodies, DIFY_TABLE codes, Dify's envelopes."""

    wing = "dify"
    max_body_bytes = 64 * KIB

    def invalid(self, problem: Problem) -> DifyError:
        code = _PROBLEMS.get(problem.kind, "dify.request_invalid")
        return DifyError(code, problem.message)

    def method_not_allowed(self, method: str) -> DifyError:
        return DifyError("dify.method_not_allowed", f"use {method}")

    def answer(self, call: Call, data: dict[str, Any]) -> Reply:
        return Reply(200, dumps(data), "passed")

    def refuse(self, event: audit.AuditEvent, call: Call | None, err: AgentError) -> Reply:
        knowledge_id = call.body.get("knowledge_id") if call is not None else None
        dify = as_dify(err, knowledge_id if isinstance(knowledge_id, str) else None)
        if dify is not err:
            event.extra["cause"] = err.code  # the core's own code beside Dify's
        body = dumps({"error_code": dify.error_code, "error_msg": dify.message})
        outcome = "denied" if isinstance(err, AccessDenied) else audit.outcome_of(dify.status)
        return Reply(dify.status, body, outcome, dify.code)
