"""What the document list shows beside each document beyond its chunk 0: when it was added and
last updated, its size, what wrote it, the writer's last refusal (`indexes.ledger`), and its
status; plus the refusals of ids the index does not hold. An index written before the ledger has
no facts: the page shows "—".
"""

from __future__ import annotations

from typing import Any

from gateway.core.runtime import Runtime
from indexes import ledger
from indexes.errors import IndexStoreError

EMPTY: dict[str, Any] = {"added_at": None, "updated_at": None, "size": None, "via": "", "refusal": None,
                         "kept_source": False}


def facts(rt: Runtime, index: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """(doc_id → {added_at, updated_at, size, via, refusal, kept_source}, refusals of ids the
    index may not hold: [{doc_id, at, via, kind, reason}]) of `index` (blocking)."""
    try:
        docs, refused = ledger.entries(rt.indexes.folder(index))
    except IndexStoreError:
        return {}, []
    out: dict[str, dict[str, Any]] = {}
    for doc_id, e in docs.items():
        out[doc_id] = {"added_at": e.added_at, "updated_at": e.updated_at, "size": e.size, "via": e.via,
                       "refusal": None, "kept_source": e.has_original}
    for doc_id, r in refused.items():
        out.setdefault(doc_id, dict(EMPTY))["refusal"] = {"at": r.at, "via": r.via, "kind": r.kind, "reason": r.reason}
    return out, [{"doc_id": r.doc_id, "at": r.at, "via": r.via, "kind": r.kind, "reason": r.reason}
                 for r in sorted(refused.values(), key=lambda r: -r.at)]


def status(qa_visible: bool, fact: dict[str, Any]) -> str:
    """'served' | 'disabled' (hidden from every caller) | 'refused' (its last write was refused:
    what is served is the version before)."""
    if fact.get("refusal"):
        return "refused"
    return "served" if qa_visible else "disabled"


def with_facts(row: dict[str, Any], fact: dict[str, Any] | None) -> dict[str, Any]:
    """`row` (a listed document) with its facts and status."""
    got = {**EMPTY, **(fact or {})}
    return {**row, **got, "status": status(bool(row.get("qa_visible")), got)}
