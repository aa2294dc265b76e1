"""What one sync source would change (`Plan`), and the sync state it is computed against.

Rationale: docs/design-notes.md, "gateway/sync/plan.py".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.core.config.sync import SyncSource
from indexes.types import Document, IngestError, IngestWarning

__all__ = ["STATE_FILE", "Plan", "ReadItem", "read_state", "write_state"]

STATE_FILE = "kbgate-sync.json"
ReadItem = Document | IngestError | IngestWarning


@dataclass(slots=True)
class Plan:
    """What a source found: documents to upsert (with their final ids; a reader's errors and
    warnings among them), ids to delete, its new state (written after the commit), what it
    reports per file or URL (`notes`), how many files or pages it found unchanged without
    re-reading them, and a one-line summary ('commit 1a2b3c4 (was none)')."""

    source: SyncSource
    upserts: list[ReadItem] = field(default_factory=list)
    deletes: set[str] = field(default_factory=set)
    state: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unchanged: int = 0
    summary: str = ""

    @property
    def ids(self) -> set[str]:
        """The ids this plan upserts."""
        return {d.id for d in self.upserts if isinstance(d, Document)}


def read_state(index_folder: Path) -> dict[str, dict[str, Any]]:
    """Source name → its recorded state; {} when there is none or it cannot be read (the next
    sync then starts afresh: it re-reads everything, and unchanged documents stay unchanged)."""
    try:
        raw = json.loads((index_folder / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    sources = raw.get("sources") if isinstance(raw, dict) else None
    if not isinstance(sources, dict):
        return {}
    return {str(k): v for k, v in sources.items() if isinstance(v, dict)}


def write_state(index_folder: Path, states: dict[str, dict[str, Any]]) -> None:
    """Record `states` (source name → state) atomically: readers of the file see the old
    record or the new one, never a part. Raises OSError when the folder cannot be written."""
    index_folder.mkdir(parents=True, exist_ok=True)
    tmp = index_folder / f".{STATE_FILE}.{os.getpid()}.tmp"
    with tmp.open("w", encoding="utf-8") as fh:
        json.dump({"version": 1, "sources": states}, fh, ensure_ascii=False, indent=1, sort_keys=True)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, index_folder / STATE_FILE)
    fd = os.open(index_folder, os.O_RDONLY)
    try:
        os.fsync(fd)  # the rename itself survives a crash
    finally:
        os.close(fd)
