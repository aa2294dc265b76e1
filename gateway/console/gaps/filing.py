"""A gap group → one improvement task in the configured tracker, through the same path as the
tool API's `create_improvement_task` (Agent Access API 技术设计 §9.6; gateway.agent.feedback): FeedbackBridge
when replay.redis_url is set (idempotency and dedupe records), else the tracker's own
find-or-create by dedupe key. Deduplicated by the group: the dedupe key is 'gap:{group id}',
so filing a group twice bumps the count of the one record instead of filing a second.

Evidence: the group's example questions (only when admin.show_queries is on and they are
kept), one note with its counts, callers and routes, and the near-miss hits it got as
citations (Agent Access API 技术设计 §9.6: "如果来自 no-answer，可包含问题和相关 citation").
"""

from __future__ import annotations

from typing import Any

from gateway.agent.feedback.bridge import draft_for
from gateway.agent.idempotency import canonical_hash
from gateway.agent.tools.clients import Clients
from gateway.console.gaps.groups import Group
from gateway.console.scores import score_text

TOOL = "create_improvement_task"
CALLER = "kbgate-admin"  # the operator's console, named in the tracker's private body


def dedupe_key(group: Group) -> str:
    """'gap:{group id}' (stable while the group's first question is kept: groups module doc)."""
    return f"gap:{group.id}"


def task_payload(group: Group, *, show_queries: bool) -> dict[str, Any]:
    """The ImprovementTaskRequest for `group` (gateway/agent/schemas/ImprovementTaskRequest.json)."""
    examples = group.examples if show_queries else []
    what = f"“{examples[0]}”" if examples else f"gap group {group.id[:12]}"
    routes = ", ".join(group.routes) or "-"
    goal = (f"Answer questions the knowledge base could not ({group.count}× on {routes}): {what}")[:500]
    paths = sorted({h["path"] for h in group.best if h.get("path")})[:20]
    scope: dict[str, Any] = {"paths": paths} if paths else {"paths": ["**"]}
    note = (f"{group.count} question(s), {group.questions} distinct: {group.no_answer} without any hit, "
            f"{group.low_score} under the gap threshold; callers {', '.join(group.callers)}; routes {routes}; "
            f"days {', '.join(f'{d}: {n}' for d, n in sorted(group.days.items()))}")[:1000]
    evidence: list[dict[str, Any]] = [{"question": q[:500]} for q in examples[:10]]
    evidence.append({"note": note})
    for h in group.best[:5]:
        evidence.append({"note": f"near miss, relevance {score_text(h.get('relevance', 0))}",
                         "citation": {"docId": h["doc_id"], "title": h.get("title", ""), "path": h.get("path", ""),
                                      "route": h.get("index", ""), "revision": h.get("revision", "")}})
    return {"goal": goal, "scope": scope, "evidence": evidence[:20], "priority": "normal"}


async def file_group(clients: Clients, group: Group, *, show_queries: bool,
                     labels: tuple[str, ...] = ("kbgate",)) -> dict[str, Any]:
    """File (or bump) the group's task (labels: access.labels). Returns the WriteResult dict plus `deduped` and
    `count`. Raises ToolError('access.tool_failed') when the store or tracker fails."""
    payload = task_payload(group, show_queries=show_queries)
    key = dedupe_key(group)
    if clients.bridge is not None:
        done = await clients.bridge.submit(tool=TOOL, caller_id=CALLER, idempotency_key=None, dedupe_key=key,
                                           payload_hash=canonical_hash({"tool": TOOL, "dedupeKey": key}),
                                           payload=payload)
        return done.data
    tracker = clients.tracker
    existing = await tracker.find("improvement_task", key)
    if existing is not None:
        count = await tracker.bump("improvement_task", key) or existing.count + 1
        return {**existing.public(), "count": count, "deduped": True}
    issue = await tracker.create(draft_for(TOOL, key, payload, CALLER, labels))
    return {**issue.public(), "count": issue.count, "deduped": False}
