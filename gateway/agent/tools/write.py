"""The write-controlled tools (Agent Access API 技术设计 §9.5, §9.6, §10): create_feedback and
create_improvement_task. They never write published content: each files one tracker record
through the FeedbackBridge, deduplicated by the payload's canonical dedupeKey and made
idempotent by the caller's idempotencyKey (gateway.agent.idempotency).
"""

from __future__ import annotations

from typing import Any

from gateway.agent.idempotency import canonical_hash
from gateway.agent.tools.read import resolve
from gateway.agent.tools.request import ToolCall, globs, invalid, strings
from gateway.core.errors import ToolError

FEEDBACK_KINDS = ("no_answer", "wrong_answer", "outdated", "missing_content", "other")


def _citations(v: Any, name: str) -> None:
    if not isinstance(v, list) or len(v) > 10 or not all(
            isinstance(c, dict) and isinstance(c.get("docId"), str) and c["docId"] for c in v):
        raise invalid(f"{name} must be up to 10 citations with a docId")


async def _write(tc: ToolCall, kind_input: dict[str, Any]) -> dict[str, Any]:
    bridge = tc.clients.get().bridge
    if bridge is None:
        raise ToolError("access.tool_failed", "write tools need replay.redis_url (idempotency records)",
                        retryable=False)
    body = tc.call.body
    payload_hash = canonical_hash({"tool": tc.tool, "scope": body.get("scope"), "input": kind_input,
                                   "dedupeKey": body["dedupeKey"]})
    done = await bridge.submit(tool=tc.tool, caller_id=tc.call.client.id,
                               idempotency_key=body.get("idempotencyKey"), dedupe_key=body["dedupeKey"],
                               payload_hash=payload_hash, payload=kind_input)
    tc.call.event.extra |= {"record": done.data["recordId"], "deduped": done.deduped, "replayed": done.replayed,
                            "idempotency_key": "idempotencyKey" in body}
    if done.deduped:
        tc.call.warn("access.feedback_deduped", f"a record with this dedupeKey exists; its count is now "
                     f"{done.data['count']} and this input was not filed separately", severity="info")
    return done.data


async def tool_create_feedback(tc: ToolCall) -> dict[str, Any]:
    """create_feedback (Agent Access API 技术设计 §9.5): FeedbackRequest → WriteResult (deduped info on repeats)."""
    f = tc.fields()
    f.only({"kind", "message", "question", "citations"})
    if f.data.get("kind") not in FEEDBACK_KINDS:
        raise invalid("input.kind must be no_answer, wrong_answer, outdated, missing_content or other")
    f.string("message", non_blank=True, max_len=2000)
    f.optional_string("question", non_blank=True, max_len=500)
    if "citations" in f:
        _citations(f.data["citations"], "input.citations")
    resolve(tc)
    return await _write(tc, tc.input)


async def tool_create_improvement_task(tc: ToolCall) -> dict[str, Any]:
    """create_improvement_task (Agent Access API 技术设计 §9.6): ImprovementTaskRequest → WriteResult.
    The task's scope must lie inside the caller's (resolved like a read)."""
    f = tc.fields()
    f.only({"goal", "scope", "evidence", "priority"})
    f.string("goal", non_blank=True, max_len=500)
    if not isinstance(f.data.get("scope"), dict) or not f.data["scope"]:
        raise invalid("input.scope must name paths and/or datasets")
    scope = f.table("scope")
    scope.only({"paths", "datasets"})
    paths = globs(scope, "paths", max_items=20)
    datasets = strings(scope, "datasets", max_items=20, max_len=128)
    ev = f.data.get("evidence", [])
    if not isinstance(ev, list) or len(ev) > 20 or not all(isinstance(e, dict) and e for e in ev):
        raise invalid("input.evidence must be up to 20 non-empty objects")
    for e in ev:
        tc.fields(e, "input.evidence[]").only({"question", "note", "citation"})
        if "citation" in e:
            _citations([e["citation"]], "input.evidence[].citation")
    f.choice("priority", ("low", "normal", "high"), "normal")
    scopes = resolve(tc, paths=paths, datasets=datasets)
    # The task records the scope the caller was granted, never the raw request (Agent Access API 技术设计 §8:
    # a request only narrows the policy; AgentBridge acts on what is recorded).
    granted = {
        "paths": sorted({g for _, e in scopes for g in (e.filter.path_globs or ("**",))}),
        "datasets": sorted({d for _, e in scopes for d in (e.filter.datasets or ("*",))}),
        "excluded": sorted({g for _, e in scopes for g in e.filter.exclude_path_globs}),
    }
    return await _write(tc, {**tc.input, "scope": granted})
