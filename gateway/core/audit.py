"""Audit: one JSON line per call of a Bearer-token wing (passed, denied, failed, partial);
Agent Access API 技术设计 §13.

Rationale: docs/design-notes.md, "gateway/core/audit.py".
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.core.config import AuditConfig
from gateway.core.events import Events
from gateway.core.scope import Principal

log = logging.getLogger("kbgate.audit")

OUTCOMES = ("passed", "denied", "failed", "partial")


@dataclass(slots=True)
class AuditEvent:
    """One call of a Bearer-token wing. ts: unix seconds from the app clock; duration_ms: wall time.

    wing: the caller's protocol ('agent', 'dify', 'mcp', 'documents'). outcome: one of OUTCOMES.
    scope: `EffectiveScope.summary()` once resolved, else None.
    """

    ts: float
    request_id: str
    tool: str
    route: str
    wing: str = "agent"
    principal: Principal | None = None
    scope: Mapping[str, object] | None = None
    outcome: str = "passed"
    status: int = 200
    code: str | None = None
    duration_ms: float = 0.0
    run_id: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        p = self.principal
        line = {
            "ts": round(self.ts, 3),
            "event": "agent_call",
            "wing": self.wing,
            "request_id": self.request_id,
            "principal": None if p is None else {
                "kind": p.kind, "id": p.id, "key_id": p.key_id, "session": p.session,
                "on_behalf_of": p.on_behalf_of},
            "route": self.route,
            "tool": self.tool,
            "scope": self.scope,
            "outcome": self.outcome,
            "status": self.status,
            "code": self.code,
            "duration_ms": round(self.duration_ms, 3),
            "run_id": self.run_id,
            **self.extra,
        }
        return orjson.dumps(line) + b"\n"


def outcome_of(status: int) -> str:
    """HTTP status of an answered call → audit outcome (partial is set by the caller)."""
    if status in (401, 403):
        return "denied"
    return "passed" if status < 400 else "failed"


def record(cfg: AuditConfig, events: Events, event: AuditEvent) -> None:
    """`write` the event's line, then publish it to `events` (observers: per-wing metrics).
    Never raises (a failing sink or observer is logged)."""
    write(cfg, event)
    events.publish(event)


def write(cfg: AuditConfig, event: AuditEvent) -> None:
    """Append `event` to the configured sink. A failing sink is logged, never raised:
    the answer has already been decided and must not turn into a 500."""
    if cfg.sink == "off":
        return
    data = event.to_json()
    try:
        if cfg.sink == "stdout":
            sys.stdout.buffer.write(data) if hasattr(sys.stdout, "buffer") else sys.stdout.write(data.decode())
            sys.stdout.flush()
            return
        assert cfg.path is not None
        fd = os.open(cfg.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as exc:
        log.error("audit sink failed", extra={"sink": cfg.sink, "error": exc.strerror})
