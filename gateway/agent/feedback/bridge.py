"""FeedbackBridge: a FeedbackRequest / ImprovementTaskRequest → one tracked record
(Agent Access API 技术设计 §6 "FeedbackBridge", §9.5, §9.6, §10).

Rationale: docs/design-notes.md, "gateway/agent/feedback/bridge.py".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson

from gateway.agent.feedback.tracker import IssueDraft, IssueTracker
from gateway.agent.idempotency import IdempotencyStore
from gateway.core.errors import ToolError
from gateway.core.validate import clip

log = logging.getLogger("kbgate.feedback")

TOOL_KINDS = {"create_feedback": "feedback", "create_improvement_task": "improvement_task"}


@dataclass(frozen=True, slots=True)
class Submitted:
    """The outcome of one write. data: the WriteResult dict. deduped: an equal record
    existed (→ access.feedback_deduped info). replayed: same idempotencyKey retried."""

    data: dict[str, Any]
    deduped: bool
    replayed: bool


def _clip(s: str, n: int) -> str:
    return clip(" ".join(s.split()), n)  # a title is one line


def draft_for(tool: str, dedupe_key: str, payload: dict[str, Any], caller_id: str,
              labels: tuple[str, ...] = ()) -> IssueDraft:
    """The issue to file for a write tool's input.

    tool: 'create_feedback' | 'create_improvement_task'. payload: the validated input.
    caller_id: goes into the (private) issue body for maintainers, never into the key.
    labels: configured base labels; the kind (and feedback kind) are added.
    """
    kind = TOOL_KINDS[tool]
    lines: list[str] = []
    if kind == "feedback":
        title = f"[kbgate feedback: {payload['kind']}] " + _clip(payload.get("question") or payload["message"], 80)
        lines += [f"**Kind:** {payload['kind']}", ""]
        if payload.get("question"):
            lines += [f"**Question:** {payload['question']}", ""]
        lines += [payload["message"], ""]
        extra: tuple[str, ...] = ("feedback", str(payload["kind"]).replace("_", "-"))
    else:
        title = "[kbgate task] " + _clip(payload["goal"], 100)
        lines += [f"**Goal:** {payload['goal']}", ""]
        scope = payload["scope"]
        for field in ("paths", "datasets"):
            if scope.get(field):
                lines.append(f"**Scope {field}:** " + ", ".join(f"`{x}`" for x in scope[field]))
        if payload.get("priority"):
            lines.append(f"**Priority:** {payload['priority']}")
        for ev in payload.get("evidence", []):
            cit = ev.get("citation")
            parts = [ev.get("question", ""), ev.get("note", ""),
                     f"`{cit['docId']}` ({cit.get('path', '')})" if cit else ""]
            lines.append("- " + " — ".join(p for p in parts if p))
        lines.append("")
        lines.append("_Candidate input for AgentBridge; not executed automatically._")
        extra = ("improvement-task",)
    for cit in payload.get("citations", []):
        lines.append(f"- cited: `{cit['docId']}` {cit.get('title', '')} ({cit.get('path', '')})")
    lines.append(f"\nReported by agent client `{caller_id}` via kbgate.")
    return IssueDraft(kind, dedupe_key, title, "\n".join(lines), tuple(dict.fromkeys(labels + extra)))


class FeedbackBridge:
    """store: the idempotency/dedupe store; tracker: any IssueTracker; labels: base labels."""

    def __init__(self, store: IdempotencyStore, tracker: IssueTracker, labels: tuple[str, ...] = ("kbgate",)) -> None:
        self.store = store
        self.tracker = tracker
        self.labels = labels

    async def submit(self, *, tool: str, caller_id: str, idempotency_key: str | None, dedupe_key: str,
                     payload_hash: str, payload: dict[str, Any]) -> Submitted:
        """File or reuse the record for one write call (Agent Access API 技术设计 §10 table).

        Returns Submitted. Raises ToolError('access.idempotency_conflict') for a reused
        idempotencyKey with another payload; ToolError('access.tool_failed') when the
        store or the tracker fails (retryable as the failure allows).
        """
        kind = TOOL_KINDS[tool]
        claim = await self.store.settle(tool=tool, caller_id=caller_id, idempotency_key=idempotency_key,
                                        dedupe_key=dedupe_key, payload_hash=payload_hash)
        if claim.outcome == "conflict":
            raise ToolError("access.idempotency_conflict")
        if claim.outcome in ("replay", "deduped"):
            assert claim.result is not None
            base = orjson.loads(claim.result)
            deduped = claim.outcome == "deduped" or claim.replayed_outcome == "deduped"
            if claim.outcome == "deduped":
                try:
                    await self.tracker.bump(kind, dedupe_key)
                except ToolError as exc:  # the count is informational; the answer stands
                    log.warning("tracker bump failed", extra={"code": exc.code})
            return Submitted({**base, "count": claim.count, "deduped": deduped}, deduped,
                             claim.outcome == "replay")
        try:
            existing = await self.tracker.find(kind, dedupe_key)
            if existing is not None:
                count = await self.tracker.bump(kind, dedupe_key) or existing.count + 1
                issue, outcome = existing, "deduped"
            else:
                issue = await self.tracker.create(draft_for(tool, dedupe_key, payload, caller_id, self.labels))
                count, outcome = issue.count, "created"
        except BaseException:
            await self.store.abandon(claim)
            raise
        base = issue.public()
        if not await self.store.finish(claim, orjson.dumps(base), outcome=outcome, count=count):
            log.warning("idempotency claim lost before finish", extra={"record": issue.record_id})
        return Submitted({**base, "count": count, "deduped": outcome == "deduped"}, outcome == "deduped", False)
