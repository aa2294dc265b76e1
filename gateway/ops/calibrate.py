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

__all__ = ["calibrate_index", "cmd_index_calibrate", "register", "said"]


def register(ixs: Any) -> None:
    """Add `calibrate` to the `kbgate index` subparsers `ixs`."""
    c = ixs.add_parser("calibrate", help="measure where the index's embedding model's cosines lie (its cosine line)")
    c.add_argument("--config", required=True)
    c.add_argument("--index", required=True)
    c.set_defaults(func=cmd_index_calibrate)


def cmd_index_calibrate(args: argparse.Namespace) -> int:
    """Measure and store the line; prints it (or why not). Returns the exit code."""
    from indexes.errors import EmbeddingError, IndexLockedError

    indexes_dir, _ = load_indexer_config(args.config)
    dense = load_indexes(args.config)[1]
    try:
        line, used = calibrate_index(indexes_dir, dense, args.index)
    except IndexLockedError as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 2
    except (LookupError, EmbeddingError) as exc:
        print(f"kbgate: {exc.args[0] if isinstance(exc, LookupError) and exc.args else exc}", file=sys.stderr)
        return 1
    print(said(args.index, line, used))
    return 0


def said(name: str, line: Any, used: Any) -> str:
    """What a calibration measured (`calibrate_index`'s answer), in one line."""
    if line is None:
        return (f"index {name}: too few documents to measure a cosine line; searches judge on "
                f"{used.zero:.4f}–{used.one:.4f} ({used.source})")
    return (f"index {name}: cosine line measured: {line.zero:.4f} → relevance 0, {line.one:.4f} → 1 "
            f"({line.probes} probes, {line.pairs} unrelated pairs); searches judge on {used.zero:.4f}–{used.one:.4f} "
            f"({used.source}); a running server uses it from its next commit or restart")


def calibrate_index(indexes_dir: Any, dense: Any, name: str) -> tuple[Any, Any]:
    """Measure and store the cosine line of hybrid index `name` (blocking): (the line measured or
    None when too few documents, the line searches use). Raises LookupError (not hybrid, no such
    index, no vectors), IndexLockedError, EmbeddingError."""
    from indexes.dense import HybridIndex, HybridStore
    from indexes.dense.config import DenseChoices

    choices = DenseChoices.of(dense)
    store = HybridStore(indexes_dir, dense=choices)
    try:
        if not store.folder(name).exists():
            raise LookupError(f"no index {name} under {indexes_dir}")
        if choices.for_index(name, store.folder(name)) is None:  # configured, or hybrid by default with vectors
            raise LookupError(f"index {name} is not hybrid (no [indexes.{name}.dense] table, no vectors): it has no "
                              "cosine line")
        index = store.create_or_open_for_write(name)
        assert isinstance(index, HybridIndex)  # the index has a dense table
        return index.calibrate(), index.cosine_line()
    finally:
        store.close()
