"""A folder as a sync source: what changed since the last sync, by size, mtime and content hash.

Rationale: docs/design-notes.md, "gateway/sync/folder.py".
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from gateway.core.config.sync import SyncSource
from indexes.changes import ids_from_source
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES, read_file, walk
from indexes.types import Document, IngestError, ServedIndex

from .plan import Plan

__all__ = ["plan_folder"]


def plan_folder(source: SyncSource, index: ServedIndex | None, recorded: dict[str, Any], *,
                max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Plan:
    """The changes that bring the index in step with the folder (module docstring). recorded:
    the source's state ({'files': {rel: [size, mtime_ns, sha256]}}). Never raises for a file:
    a missing folder is one IngestError (nothing is deleted then)."""
    plan = Plan(source)
    top = Path(source.location)
    if not top.is_dir():
        plan.upserts.append(IngestError(source.location, "no such folder: nothing synced, nothing deleted",
                                        kind="unreadable"))
        plan.state = recorded
        return plan
    root = os.path.realpath(top)
    held = ids_from_source(index, root + os.sep) if index is not None else {}
    raw = recorded.get("files")
    before: dict[str, Any] = raw if isinstance(raw, dict) else {}
    files: dict[str, list[Any]] = {}
    keep_sources: set[str] = set()  # files found unchanged: their documents stay
    errors = False
    for item in walk(top):
        if not isinstance(item, Path):
            plan.upserts.append(item)
            errors = errors or isinstance(item, IngestError)
            continue
        rel = item.relative_to(top).as_posix()
        real = os.path.realpath(item)
        try:
            st = item.stat()
        except OSError as exc:
            plan.upserts.append(IngestError(rel, f"cannot read: {exc.strerror or exc}", kind="unreadable"))
            keep_sources.add(real)
            errors = True
            continue
        was = before.get(rel)
        if isinstance(was, list) and len(was) == 3 and was[:2] == [st.st_size, st.st_mtime_ns]:
            files[rel] = was
            keep_sources.add(real)
            plan.unchanged += 1
            continue
        try:
            digest = hashlib.sha256(item.read_bytes()).hexdigest()
        except OSError as exc:
            plan.upserts.append(IngestError(rel, f"cannot read: {exc.strerror or exc}", kind="unreadable"))
            keep_sources.add(real)
            errors = True
            continue
        files[rel] = [st.st_size, st.st_mtime_ns, digest]
        if isinstance(was, list) and len(was) == 3 and was[2] == digest and any(s == real for s in held.values()):
            keep_sources.add(real)  # touched, not changed
            plan.unchanged += 1
            continue
        docs = list(read_file(item, rel, max_document_bytes=max_document_bytes, dataset=source.dataset or None,
                              bounds=source.read_bounds))
        plan.upserts.extend(docs)
        if any(isinstance(d, IngestError) for d in docs):
            keep_sources.add(real)  # a file that fails keeps what the index has of it
            errors = True
            files.pop(rel)  # read again next time
    seen = plan.ids
    plan.deletes = {i for i, s in held.items() if s not in keep_sources and i not in seen}
    plan.state = {"files": files}
    changed = sum(1 for d in plan.upserts if isinstance(d, Document))
    plan.summary = f"{len(files)} files, {changed} read, {plan.unchanged} unchanged" + (" (errors)" if errors else "")
    return plan
