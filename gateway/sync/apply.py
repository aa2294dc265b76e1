"""A sync run's plans as one change set, applied through `indexes.changes.apply_changes`.

Rationale: docs/design-notes.md, "gateway/sync/apply.py".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from indexes.changes import ChangeReport, Refusal, apply_changes
from indexes.types import ChangeSet, Document, IngestError, IngestWarning, ServedIndex

from .plan import Plan

__all__ = ["apply_sync", "change_set"]

Notes = list[tuple[str, str]]


def change_set(plans: Iterable[Plan], *, replace: bool) -> tuple[ChangeSet, Notes, Notes]:
    """(the change set of `plans`, the readers' errors, their warnings) as (where, reason) pairs.

    Upserts keep the order read; an id read twice (two sources, two files) keeps the last copy,
    with a warning naming both, as `kbgate index add` does; an id both upserted and deleted is
    upserted. Raises nothing."""
    docs: dict[str, Document] = {}
    errors: Notes = []
    warnings: Notes = []
    deletes: set[str] = set()
    for plan in plans:
        deletes |= plan.deletes
        for item in plan.upserts:
            if isinstance(item, IngestError):
                errors.append((item.where, item.reason))
            elif isinstance(item, IngestWarning):
                warnings.append((item.where, item.reason))
            else:
                earlier = docs.pop(item.id, None)
                if earlier is not None:
                    warnings.append((item.origin or item.id, f"duplicate id {item.id!r} overrides "
                                                             f"{earlier.origin or 'an earlier copy'} (the last "
                                                             "one read is indexed)"))
                docs[item.id] = item
    changes = ChangeSet(upserts=tuple(docs.values()), deletes=tuple(sorted(deletes - set(docs))), replace=replace,
                        via="sync")
    return changes, errors, warnings


def apply_sync(index: ServedIndex, changes: ChangeSet, *, wait_seconds: float,
               progress: bool) -> tuple[ChangeReport, list[Refusal]]:
    """`apply_changes(index, changes)`, again without the ids it refused until none is: (the
    report of the attempt that was applied, every refusal). At most one commit; each attempt
    removes at least one id, so this ends. Raises what `apply_changes` raises (IndexLockedError
    after `wait_seconds`, EmbeddingError: nothing of the run was committed)."""
    refused: list[Refusal] = []
    while True:
        report = apply_changes(index, changes, wait_seconds=wait_seconds, progress=progress, workers=None)
        if not report.refused:
            return report, refused
        refused.extend(report.refused)
        out = {r.doc_id for r in report.refused}
        changes = dataclasses.replace(changes, upserts=tuple(d for d in changes.upserts if d.id not in out),
                                      deletes=tuple(i for i in changes.deletes if i not in out))
