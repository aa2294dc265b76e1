"""The `ask` tool's Answer API (Agent Access API 技术设计 §9.2): an AnswerRequest → an AnswerResult.

Rationale: docs/design-notes.md, "gateway/agent/upstream_answer.py".
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.core.errors import ToolError

log = logging.getLogger("kbgate.answer")


@dataclass(frozen=True, slots=True)
class Passage:
    """One in-scope passage: text (plain, bounded), score (BM25), citation (Citation dict)."""

    text: str
    score: float
    citation: dict[str, Any]


def no_answer_actions(question: str, citations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Suggested next steps for a no-answer (Agent Access API 技术设计 §9.2, §9.6): rephrase, widen the
    scope, file feedback (no_answer), or propose an improvement task with the question
    as evidence."""
    return [
        {"type": "rephrase", "description": "ask again with other words or fewer terms"},
        {"type": "widen_scope", "description": "ask without narrowing routes, paths or datasets"},
        {"type": "create_feedback", "tool": "create_feedback",
         "description": "report that the knowledge base has no answer",
         "suggestedInput": {"kind": "no_answer", "question": question,
                            "message": f"no answer found for: {question}"[:2000]}},
        {"type": "create_improvement_task", "tool": "create_improvement_task",
         "description": "propose content that would answer this question",
         "suggestedInput": {"goal": f"answer: {question}"[:500],
                            "evidence": [{"question": question}] + [{"citation": c} for c in citations[:3]]}},
    ]


def extractive(question: str, passages: list[Passage], *, min_score: float = 0.0) -> dict[str, Any]:
    """An Answer (schema Answer.json) made of the passages themselves.

    passages: best first, already scope-filtered. min_score: below it the best passage is
    'low_confidence'. Returns answer=None with noAnswerReason and actions when nothing
    qualifies; never invents text.
    """
    base: dict[str, Any] = {"mode": "extractive",
                            "passages": [{"text": p.text, "score": round(p.score, 4), "citation": p.citation}
                                         for p in passages]}
    if not passages:
        return {**base, "answer": None, "citations": [], "noAnswerReason": "no_passages",
                "actions": no_answer_actions(question, [])}
    if passages[0].score < min_score:
        return {**base, "answer": None, "citations": [], "noAnswerReason": "low_confidence",
                "actions": no_answer_actions(question, [p.citation for p in passages])}
    lines = [f"[{i}] {p.citation['title']}: {p.text}" for i, p in enumerate(passages, 1)]
    return {**base, "answer": "\n".join(lines), "citations": [p.citation for p in passages]}


async def upstream(client: httpx.AsyncClient, url: str, question: str, passages: list[Passage],
                   limit: int) -> dict[str, Any]:
    """Ask the configured Answer API; returns an Answer (mode 'upstream').

    Raises ToolError('access.tool_failed'): retryable for timeouts, transport errors and
    5xx; not retryable for 4xx or a body that is not the contract above. Citations that
    name no sent passage are dropped (scope cannot be widened), with a log line.
    """
    ids = {f"p{i}": p for i, p in enumerate(passages, 1)}
    body = {"question": question, "limit": limit,
            "passages": [{"id": k, "text": p.text, "citation": p.citation} for k, p in ids.items()]}
    try:
        r = await client.post(url, json=body)
    except httpx.HTTPError:
        raise ToolError("access.tool_failed", "the answer service did not answer", retryable=True) from None
    if r.status_code >= 500 or r.status_code == 429:
        raise ToolError("access.tool_failed", f"the answer service failed (HTTP {r.status_code})", retryable=True)
    if not r.is_success:
        raise ToolError("access.tool_failed", f"the answer service refused (HTTP {r.status_code})", retryable=False)
    try:
        data = r.json()
        answer = data.get("answer")
        cited = data.get("citations", [])
        if (answer is not None and not isinstance(answer, str)) or not isinstance(cited, list):
            raise ValueError
    except (ValueError, AttributeError):
        raise ToolError("access.tool_failed", "the answer service answered outside its contract",
                        retryable=False) from None
    kept = [ids[c].citation for c in cited if isinstance(c, str) and c in ids]
    if len(kept) != len(cited):
        log.warning("answer service cited outside the passages", extra={"dropped": len(cited) - len(kept)})
    passages_out = [{"text": p.text, "score": round(p.score, 4), "citation": p.citation} for p in passages]
    if answer is None or not answer.strip():
        return {"mode": "upstream", "answer": None, "citations": [], "passages": passages_out,
                "noAnswerReason": "no_passages" if not passages else "upstream_no_answer",
                "actions": no_answer_actions(question, [p.citation for p in passages])}
    return {"mode": "upstream", "answer": answer, "citations": kept, "passages": passages_out}
