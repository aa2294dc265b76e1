"""`kbgate sync`: bring each index in step with its sources, once or every DURATION.

Rationale: docs/design-notes.md, "gateway/sync/run.py".
"""

from __future__ import annotations

import argparse
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

from gateway.core.config.sync import SyncSource
from indexes.invisible import shown

__all__ = ["cmd_sync", "parse_duration", "register", "sync_index"]

_DURATION = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> float:
    """'90', '30s', '5m', '1h30m', '1d' → seconds (> 0). Raises ValueError."""
    text = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        seconds = float(text)
    else:
        parts = _DURATION.findall(text)
        if not parts or "".join(a + b for a, b in parts) != text:
            raise ValueError(f"{text!r} is not a duration (e.g. 30s, 5m, 1h30m)")
        seconds = sum(float(n) * _UNIT[u] for n, u in parts)
    if seconds <= 0:
        raise ValueError("a duration must be more than 0 seconds")
    return seconds


def register(sub: Any) -> None:
    """Add `sync` to the `kbgate` subparsers `sub`."""
    s = sub.add_parser("sync", help="keep indexes current from their [[indexes.NAME.sources]] (Git, web, folder)")
    s.add_argument("--config", required=True)
    s.add_argument("--index", help="only this index (default: every index with sources)")
    s.add_argument("--source", help="only the source of this name")
    s.add_argument("--dry-run", action="store_true", help="show what would change; change nothing")
    s.add_argument("--every", metavar="DURATION", help="run again every DURATION (30s, 10m, 1h) until stopped")
    s.add_argument("--replace", action="store_true",
                   help="let a source replace documents indexed from elsewhere (default: refuse them)")
    s.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="wait this long for the index's writer while another holds it (a running server's document "
                        "API, kbgate index add); default 60")
    s.add_argument("--no-progress", action="store_true")
    s.set_defaults(func=cmd_sync)


def _plan(source: SyncSource, index: Any, recorded: dict[str, Any], work: Path, max_bytes: int) -> Any:
    if source.kind == "git":
        from .git import plan_git

        return plan_git(source, index, recorded, work, max_document_bytes=max_bytes)
    if source.kind == "web":
        from .web import plan_web

        return plan_web(source, recorded, max_document_bytes=max_bytes)
    from .folder import plan_folder

    return plan_folder(source, index, recorded, max_document_bytes=max_bytes)


def sync_index(store: Any, name: str, sources: tuple[SyncSource, ...], *, dry_run: bool, max_bytes: int,
               replace: bool = False, progress: bool = False, wait_seconds: float = 60.0) -> int:
    """One run for index `name` of `store` (an `indexes.dense.HybridStore`): prints what each
    source found and what changed; returns 1 when a source failed or an input was refused, else 0.
    wait_seconds: how long to wait for the index's writer while another holds it; a writer
    held longer, or a hybrid index's embedding provider failing, is reported and returns 1
    (nothing committed, the state kept: the next run tries again)."""
    from indexes.errors import EmbeddingError, IndexLockedError
    from indexes.records import document_revision
    from indexes.types import Document, IngestError, IngestWarning

    from .apply import apply_sync, change_set
    from .git import GitError
    from .plan import read_state, write_state

    folder = store.folder(name)
    states = read_state(folder)
    exists = store.exists(name)
    index = store.create_or_open_for_write(name) if exists or not dry_run else None
    failed = 0
    plans = []
    for source in sources:
        try:
            plan = _plan(source, index, states.get(source.name, {}), folder / "sync", max_bytes)
        except (GitError, OSError) as exc:
            print(shown(f"  source {source.key}: failed: {exc}; nothing of it changed"), file=sys.stderr)
            failed += 1
            continue
        print(f"source {source.key} ({source.kind}): {plan.summary}")
        for note in plan.notes:
            print(shown(f"  {note}"), file=sys.stderr)
        failed += sum(1 for n in plan.notes if n.startswith("error"))
        plans.append(plan)
    upserts = [d for p in plans for d in p.upserts]
    if dry_run:
        deletes = {i for p in plans for i in p.deletes}
        known = index.revisions() if index is not None else {}
        docs = {d.id: d for d in upserts if isinstance(d, Document)}
        added = sorted(i for i in docs if i not in known)
        updated = sorted(i for i, d in docs.items() if i in known and known[i] != document_revision(d))
        gone = sorted(i for i in deletes if i in known and i not in docs)
        print(f"index {name} (dry run, nothing changed): would add {len(added)}, update {len(updated)}, "
              f"delete {len(gone)}; {len(docs) - len(added) - len(updated)} read unchanged")
        for verb, ids in (("add", added), ("update", updated), ("delete", gone)):
            for doc_id in ids:
                print(shown(f"  would {verb} {doc_id}"))
        report_errors = [(e.where, e.reason) for e in upserts if isinstance(e, IngestError)]
        report_warnings = [(w.where, w.reason) for w in upserts if isinstance(w, IngestWarning)]
    else:
        started = time.perf_counter()
        assert index is not None  # opened (created when new) unless a dry run
        changes, report_errors, report_warnings = change_set(plans, replace=replace)
        origins = {d.id: d.origin or f"document {d.id!r}" for d in changes.upserts}
        try:
            report, refused = apply_sync(index, changes, wait_seconds=wait_seconds, progress=progress)
        except (IndexLockedError, EmbeddingError) as exc:  # nothing committed, no state written
            print(shown(f"  index {name}: {exc}; nothing changed, the next run tries again"), file=sys.stderr)
            return 1
        retry = {r.doc_id for r in refused}  # a source with a refused document is read again next run
        write_state(folder, {**states, **{p.source.name: p.state for p in plans if not p.ids & retry}})
        print(f"index {name}: {report.count('added')} added, {report.count('updated')} updated, "
              f"{report.count('unchanged')} unchanged, {report.count('deleted')} deleted, {report.chunks} chunks "
              f"written in {time.perf_counter() - started:.1f} s (generation {report.generation}"
              f"{'' if report.commit is not None else ', no commit'})")
        dense_report = getattr(index, "last_dense_report", None)
        if dense_report is not None:
            print(dense_report.line(name))
        report_errors += [(origins[r.doc_id] if r.doc_id in origins else f"document {r.doc_id!r}", r.reason)
                          for r in refused]
        report_warnings += report.warnings
    for where, reason in report_errors:
        print(shown(f"  skipped {where}: {reason}"), file=sys.stderr)
    for where, message in report_warnings:
        print(shown(f"  warning {where}: {message}"), file=sys.stderr)
    return 1 if failed or report_errors else 0


_STOP = threading.Event()


def _stop(signum: int, frame: FrameType | None) -> None:
    """SIGTERM under --every: finish the run under way, then stop (`cmd_sync`)."""
    _STOP.set()


def cmd_sync(args: argparse.Namespace) -> int:
    """`kbgate sync` (module docstring). Returns the exit code."""
    from gateway.core.config import load_backends, load_indexer_config, load_sync_config
    from indexes.dense import HybridStore

    indexes_dir, dense, sources = load_sync_config(args.config)
    max_bytes = load_indexer_config(args.config)[1]
    chosen: Mapping[str, tuple[SyncSource, ...]] = sources
    if args.index is not None:
        chosen = {args.index: sources.get(args.index, ())}
    if args.source is not None:
        chosen = {n: tuple(s for s in ss if s.name == args.source) for n, ss in chosen.items()}
    chosen = {n: ss for n, ss in chosen.items() if ss}
    if not chosen:
        what = f" named {args.source!r}" if args.source else ""
        where = f" for index {args.index!r}" if args.index else ""
        print(f"kbgate: no sync source{what}{where} in {args.config} (declare [[indexes.NAME.sources]])",
              file=sys.stderr)
        return 2
    every = None
    if args.every is not None:
        try:
            every = parse_duration(args.every)
        except ValueError as exc:
            print(f"kbgate: --every {exc}", file=sys.stderr)
            return 2
    if every is not None:
        signal.signal(signal.SIGTERM, _stop)
    store = HybridStore(indexes_dir, dense=dense, remote=load_backends(args.config))
    while True:
        started = time.monotonic()
        code = 0
        for name, ss in chosen.items():
            code = max(code, sync_index(store, name, ss, dry_run=args.dry_run, max_bytes=max_bytes,
                                        replace=args.replace, progress=not args.no_progress,
                                        wait_seconds=max(args.wait, 0.0)))
        sys.stdout.flush()
        if every is None:
            return code
        try:
            if _STOP.wait(max(0.0, started + every - time.monotonic())):
                return code
        except KeyboardInterrupt:
            return code
