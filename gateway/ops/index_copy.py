"""`kbgate index copy --config FILE --index NAME --to milvus`: a Tantivy index's documents into
the Milvus collection the config names for it (docs/scaling.md, step 3).

Rationale: docs/design-notes.md, "gateway/ops/index_copy.py".
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.core.config import load_backends, load_indexes_dir
from gateway.core.errors import ConfigError
from indexes.errors import IndexStoreError
from indexes.types import Document

__all__ = ["cmd_index_copy", "register"]

BATCH = 200


def register(ixs: Any) -> None:
    c = ixs.add_parser("copy", help="copy a Tantivy index into the Milvus collection its config names")
    c.add_argument("--config", required=True)
    c.add_argument("--index", required=True)
    c.add_argument("--to", required=True, choices=("milvus",), help="the backend to copy to")
    c.set_defaults(func=cmd_index_copy)


def cmd_index_copy(args: argparse.Namespace) -> int:
    """Copy (module doc). Exit 0 when both hold the same documents and revisions, 1 when not, 2 on
    a usage or config problem."""
    from indexes.store import IndexStore

    try:
        root, backends = load_indexes_dir(args.config), load_backends(args.config)
    except ConfigError as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 2
    if args.index not in backends:
        print(f'kbgate: [indexes.{args.index}] has no backend = "{args.to}": add its table (uri, collection) '
              "to the config first", file=sys.stderr)
        return 2
    local, remote = IndexStore(root), IndexStore(root, remote=backends)
    try:
        source = local.open(args.index)
        target = remote.create_or_open_for_write(args.index)
        wanted = source.revisions()
        batch: list[Document] = []
        written = 0
        for doc_id in sorted(wanted):
            doc = source.as_document(doc_id)
            if doc is not None:
                batch.append(doc)
            if len(batch) >= BATCH:
                written += _write(target, batch)
                batch = []
        written += _write(target, batch)
        got = target.revisions()
    except IndexStoreError as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 2 if exc.reason != "unreachable" else 1
    finally:
        local.close()
        remote.close()
    differ = sorted(d for d in set(wanted) | set(got) if wanted.get(d) != got.get(d))
    print(f"index {args.index}: {len(wanted)} documents in the folder, {written} written to milvus, "
          f"{len(got)} there now")
    if differ:
        print(f"kbgate: {len(differ)} documents differ between the folder and milvus (first: {differ[0]!r})",
              file=sys.stderr)
        return 1
    return 0


def _write(target: Any, docs: list[Document]) -> int:
    if not docs:
        return 0
    report = target.ingest(docs, progress=False, replace=True)
    return int(report.added + report.updated)
