"""`kbgate index calibrate --config FILE --index NAME`: measure and store the cosine line of a
hybrid index's vectors (docs/hybrid-retrieval.md, "The cosine line"), for vectors built before
it was measured. Exit codes: 0 measured (or too small, said so), 1 lexical, no vectors or the
provider failed, 2 another writer holds the index.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gateway.core.config import load_indexer_config, load_indexes

__all__ = ["cmd_index_calibrate", "register"]


def register(ixs: Any) -> None:
    """Add `calibrate` to the `kbgate index` subparsers `ixs`."""
    c = ixs.add_parser("calibrate", help="measure where the index's embedding model's cosines lie (its cosine line)")
    c.add_argument("--config", required=True)
    c.add_argument("--index", required=True)
    c.set_defaults(func=cmd_index_calibrate)


def cmd_index_calibrate(args: argparse.Namespace) -> int:
    """Measure and store the line; prints it (or why not). Returns the exit code."""
    from indexes.dense import HybridIndex, HybridStore
    from indexes.errors import EmbeddingError, IndexLockedError

    indexes_dir, _ = load_indexer_config(args.config)
    dense = load_indexes(args.config)[1]
    if args.index not in dense:
        print(f"kbgate: index {args.index} is not hybrid (no [indexes.{args.index}.dense] table): it has no cosine "
              "line", file=sys.stderr)
        return 1
    store = HybridStore(indexes_dir, dense=dense)
    try:
        if not store.folder(args.index).exists():
            print(f"kbgate: no index {args.index} under {indexes_dir}", file=sys.stderr)
            return 1
        index = store.create_or_open_for_write(args.index)
        assert isinstance(index, HybridIndex)  # the index has a dense table
        line = index.calibrate()
        used = index.cosine_line()
    except IndexLockedError as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 2
    except (LookupError, EmbeddingError) as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 1
    finally:
        store.close()
    if line is None:
        print(f"index {args.index}: too few documents to measure a cosine line; searches judge on "
              f"{used.zero:.4f}–{used.one:.4f} ({used.source})")
        return 0
    print(f"index {args.index}: cosine line measured: {line.zero:.4f} → relevance 0, {line.one:.4f} → 1 "
          f"({line.probes} probes, {line.pairs} unrelated pairs); searches judge on {used.zero:.4f}–{used.one:.4f} "
          f"({used.source}); a running server uses it from its next commit or restart")
    return 0
