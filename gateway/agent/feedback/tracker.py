"""The IssueTracker adapter interface and the shapes the bridge and adapters share.

An adapter maps (kind, dedupe key) → one tracked issue. It raises only
`ToolError('access.tool_failed', retryable=..., retry_after=...)`, with a message safe
to return to an agent (no token, no tracker URL).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

KINDS = ("feedback", "improvement_task")
_PREFIX = {"feedback": "fb", "improvement_task": "task"}


def record_id(kind: str, dedupe_key: str) -> str:
    """kbgate's public id of a record: 'fb_' or 'task_' + 24 hex digits of
    SHA-256(kind, dedupe key). Deterministic, so every worker and tracker agree."""
    digest = hashlib.sha256(f"{kind}\x00{dedupe_key}".encode()).hexdigest()[:24]
    return f"{_PREFIX[kind]}_{digest}"


def marker_of(kind: str, dedupe_key: str) -> str:
    """32 hex digits naming a record inside a tracker (the hidden body marker)."""
    return hashlib.sha256(f"kbgate\x00{kind}\x00{dedupe_key}".encode()).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class IssueDraft:
    """What to file. kind: one of KINDS. title: ≤ 256 chars. body: Markdown (the adapter
    adds its hidden marker). labels: tracker labels (private to the tracker)."""

    kind: str
    dedupe_key: str
    title: str
    body: str
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"IssueDraft.kind must be one of {KINDS}")
        if not self.title or len(self.title) > 256:
            raise ValueError("IssueDraft.title must be 1-256 characters")


@dataclass(frozen=True, slots=True)
class TrackedIssue:
    """One record in a tracker. created_at: unix seconds. count: reports folded into it.

    private: the tracker's own fields (e.g. GitHub number and URL) — for operators and
    logs, never for the public contract (Agent Access API 技术设计 §3, §11).
    """

    kind: str
    dedupe_key: str
    created_at: int
    count: int = 1
    private: Mapping[str, object] = field(default_factory=dict)

    @property
    def record_id(self) -> str:
        return record_id(self.kind, self.dedupe_key)

    def public(self) -> dict[str, object]:
        """The WriteResult fields this record defines (without count and deduped)."""
        return {"recordId": self.record_id, "kind": self.kind, "state": "open", "createdAt": self.created_at}


class IssueTracker(Protocol):
    """Where feedback and improvement tasks are filed.

    find(kind, dedupe_key) → the record or None. create(draft) → the new record (callers
    look it up with `find` first). bump(kind, dedupe_key) → the raised count, or None when
    the tracker does not know the record. All raise ToolError('access.tool_failed').
    """

    name: str

    async def find(self, kind: str, dedupe_key: str) -> TrackedIssue | None: ...

    async def create(self, draft: IssueDraft) -> TrackedIssue: ...

    async def bump(self, kind: str, dedupe_key: str) -> int | None: ...

    async def close(self) -> None: ...
