"""`kbgate deleted list|restore|purge`: the documents deleted from the console, on the server
(gateway/documents/deleted.py keeps them for `admin.keep_deleted_days`).

Rationale: docs/design-notes.md, "gateway/console/deleted_cli.py".
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from gateway.console.changes import audit_change, cli_user
from gateway.core.config import Config, load_config, load_indexes
from gateway.documents import deleted
from indexes.errors import IndexNotFoundError
from indexes.types import ChangeSet


def register(sub: Any) -> None:
    """Add `deleted` and its subcommands to the `kbgate` parser's subparsers `sub`."""
    d = sub.add_parser("deleted", help="documents deleted from the console: list, restore, purge")
    ds = d.add_subparsers(dest="deleted_command", required=True)
    ls = ds.add_parser("list", help="the restorable deletions, newest first")
    ls.add_argument("--config", required=True, type=Path)
    ls.add_argument("--index", help="only this index")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_list)
    r = ds.add_parser("restore", help="write a deleted document back into its index")
    r.add_argument("--config", required=True, type=Path)
    r.add_argument("--index", required=True)
    r.add_argument("doc_id", metavar="ID")
    r.set_defaults(func=cmd_restore)
    p = ds.add_parser("purge", help="remove the deletions kept longer than admin.keep_deleted_days")
    p.add_argument("--config", required=True, type=Path)
    p.set_defaults(func=cmd_purge)


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _kept(config: Config, index: str | None, now: float) -> list[deleted.Kept]:
    base = config.indexes_dir / deleted.FOLDER
    names = [index] if index else sorted(p.name for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
    return [k for n in names for k in deleted.listing(config.indexes_dir, n, now=now,
                                                      days=config.admin.keep_deleted_days)]


def cmd_list(args: argparse.Namespace) -> int:
    config = load_config(args.config, read_secrets=False)
    rows = _kept(config, args.index, time.time())
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"deleted": [
            {"index": k.index, "id": k.doc_id, "title": k.title, "deleted_at": k.deleted_at, "by": k.by,
             "until": k.until} for k in rows]}, option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    for k in rows:
        print(f"{k.index}  {k.doc_id}  deleted {_iso(k.deleted_at)} by {k.by}, restorable until {_iso(k.until)}")
    if not rows:
        print(f"no restorable deletion (kept {config.admin.keep_deleted_days} day(s): admin.keep_deleted_days)")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    from indexes.changes import apply_changes
    from indexes.dense import HybridStore

    config = load_config(args.config, read_secrets=False)
    days = config.admin.keep_deleted_days
    found = deleted.find(config.indexes_dir, args.index, now=time.time(), days=days, doc_id=args.doc_id)
    if found is None:
        print(f"kbgate: no deletion of {args.doc_id} in index {args.index} to restore (kept {days} day(s): "
              "admin.keep_deleted_days)", file=sys.stderr)
        return 1
    kept, doc = found
    store = HybridStore(config.indexes_dir, dense=load_indexes(args.config)[1])
    try:
        present = store.open(args.index).get_document(doc.id, include_hidden=True) is not None
    except IndexNotFoundError:
        present = False
    if present:
        print(f"kbgate: index {args.index} holds a document {doc.id} again (added after the delete): nothing was "
              "restored; delete that one first to restore the deleted one", file=sys.stderr)
        return 1
    handle = store.create_or_open_for_write(args.index)
    try:
        report = apply_changes(handle, ChangeSet(upserts=(doc,), via="cli"),
                               wait_seconds=config.documents.write_timeout_seconds)
    finally:
        handle.close()
        store.close()
    deleted.drop(config.indexes_dir, args.index, kept.entry)
    audit_change(config, cli_user(), "documents.restore", args.index, ids=[doc.id], commit=report.commit)
    print(f"restored {doc.id} into index {args.index} (deleted {_iso(kept.deleted_at)} by {kept.by}); a running "
          "server serves it at its next search")
    return 0


def cmd_purge(args: argparse.Namespace) -> int:
    config = load_config(args.config, read_secrets=False)
    gone = deleted.purge(config.indexes_dir, now=time.time(), days=config.admin.keep_deleted_days)
    print(f"{gone} deletion(s) kept longer than {config.admin.keep_deleted_days} day(s) purged")
    return 0
