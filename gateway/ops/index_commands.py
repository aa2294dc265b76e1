"""`kbgate index add|list|stats`: build and inspect indexes (registered by gateway/cli.py).

Rationale: docs/design-notes.md, "gateway/ops/index_commands.py".
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gateway.core.config import load_backends, load_indexer_config, load_indexes, load_indexes_dir, load_read_bounds
from indexes import ledger
from indexes.errors import IndexStoreError
from indexes.invisible import shown
from indexes.types import Document, IngestReport

__all__ = ["EmbedRefused", "cmd_index_add", "cmd_index_embed", "cmd_index_list", "embed_index", "register"]


def register(sub: Any) -> None:
    """Add `index add|create|list|stats` to the `kbgate` subparsers `sub`."""
    ix = sub.add_parser("index", help="build and inspect indexes")
    ixs = ix.add_subparsers(dest="index_command")
    a = ixs.add_parser("add", help="ingest Markdown, HTML, text, PDF, DOCX, PPTX, XLSX, reStructuredText and "
                                         "JSONL files into an index")
    a.add_argument("--config", required=True)
    a.add_argument("--index", required=True)
    a.add_argument("--delete-missing", action="store_true", help="remove documents not seen in this run")
    a.add_argument("--dataset", default=None, help="dataset name for documents that do not carry one")
    a.add_argument("--root", default=None, metavar="DIR",
                   help="folder that document paths and ids are relative to (default: the one this index "
                        "recorded for the dataset, else the folder given)")
    a.add_argument("--url-base", default=None, metavar="URL",
                   help="absolute http(s) URL that relative page URLs (front matter / JSONL url) resolve against")
    a.add_argument("--allow-empty", action="store_true",
                   help="exit 0 even when the files given hold no document kbgate reads")
    a.add_argument("--force", action="store_true",
                   help="with --delete-missing: allow PATHs that are single files (deletes every other document)")
    a.add_argument("--replace", action="store_true",
                   help="replace documents indexed from another source file (default: refuse them)")
    a.add_argument("--max-document-bytes", type=int, default=None, metavar="BYTES",
                   help="refuse documents larger than this (default: indexes.max_document_bytes, 10 MiB)")
    a.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="wait this long for the index's writer while another holds it (a running server's "
                        "document API, a sync); default 60")
    a.add_argument("--no-progress", action="store_true")
    a.add_argument("paths", nargs="+")
    a.set_defaults(func=cmd_index_add)
    c = ixs.add_parser("create", help="make an empty index (the document API and console uploads write only to "
                                      "indexes that exist)")
    c.add_argument("--config", required=True)
    c.add_argument("--index", required=True)
    c.set_defaults(func=cmd_index_create)
    e = ixs.add_parser("embed", help="give an index built lexical its dense vectors (the embedded default model, "
                                     "or its [indexes.NAME.dense] settings)")
    e.add_argument("--config", required=True)
    e.add_argument("--index", required=True)
    e.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="wait this long for the index's writer while another holds it; default 60")
    e.add_argument("--no-progress", action="store_true")
    e.set_defaults(func=cmd_index_embed)
    ls = ixs.add_parser("list", help="list indexes under indexes.dir")
    ls.add_argument("--config", required=True)
    ls.set_defaults(func=cmd_index_list)
    st = ixs.add_parser("stats", help="document and chunk counts of indexes")
    st.add_argument("--config", required=True)
    st.add_argument("--index")
    st.set_defaults(func=cmd_index_list)
    from gateway.ops.replicas import register as register_replicas

    register_replicas(ixs)  # index publish|fetch
    from gateway.ops.calibrate import register as register_calibrate

    register_calibrate(ixs)  # index calibrate
    from gateway.ops.index_copy import register as register_copy

    register_copy(ixs)  # index copy --to milvus


def _command(args: argparse.Namespace) -> str:
    """The `kbgate index add` words naming this run's config, index and dataset."""
    words = ["kbgate", "index", "add", "--config", args.config, "--index", args.index]
    if args.dataset:
        words += ["--dataset", args.dataset]
    return " ".join(map(shlex.quote, words))


def cmd_index_add(args: argparse.Namespace) -> int:
    """`kbgate index add`: one ingest run, one commit. Returns the exit code."""
    from indexes.dense import HybridStore
    from indexes.ingest import delete_missing_problem, read_paths
    from indexes.roots import choose_root, read_roots, remember_root
    from indexes.safe_text import url_problem

    indexes_dir, max_bytes = load_indexer_config(args.config)  # the indexer needs no secrets
    bounds = load_read_bounds(args.config)
    dense = load_indexes(args.config)[1]  # only an embedding API key
    store = HybridStore(indexes_dir, dense=dense, remote=load_backends(args.config))  # a Milvus token only
    if args.max_document_bytes is not None:
        if args.max_document_bytes < 1:
            print("kbgate: --max-document-bytes must be a positive number of bytes", file=sys.stderr)
            return 2
        max_bytes = args.max_document_bytes
    if args.url_base is not None and url_problem(args.url_base) is not None:
        print(f"kbgate: --url-base {url_problem(args.url_base)}: it must be an absolute http(s) URL", file=sys.stderr)
        return 2
    missing = [p for p in args.paths if not Path(p).exists()]
    if missing:
        print(shown(f"kbgate: no such file or folder: {', '.join(missing)}"), file=sys.stderr)
        return 2
    folder = store.folder(args.index)
    dataset = args.dataset or ""
    choice = choose_root(args.root, args.paths, read_roots(folder).get(dataset), command=_command(args),
                         delete_missing=args.delete_missing)
    if choice.note is not None:
        print(shown(f"kbgate: note: {choice.note}"), file=sys.stderr)
    if choice.problem is not None:
        print(shown(f"kbgate: {choice.problem}"), file=sys.stderr)
        return 2
    if args.delete_missing and not args.force:
        problem = delete_missing_problem(args.paths, choice.root)
        if problem is not None:
            print(shown(f"kbgate: {problem}"), file=sys.stderr)
            return 2
    created = not folder.exists()
    index = store.create_or_open_for_write(args.index)
    items = read_paths([Path(p) for p in args.paths], max_document_bytes=max_bytes, root=choice.root,
                       dataset=args.dataset or None, url_base=args.url_base, bounds=bounds)
    started = time.perf_counter()
    sizes: dict[str, int] = {}
    items = _sized(items, sizes)
    report = _ingest_waiting(index, items, args, delete_missing=args.delete_missing, progress=not args.no_progress,
                             replace=args.replace)
    indexed = report.added + report.updated + report.unchanged
    if indexed and choice.record is not None:
        # Only a run that committed documents: their ids are relative to this root now.
        remember_root(index.path, args.index, dataset, choice.record)
    if report.commit is not None:
        ledger.note_written(index.path, report.changes, sizes, via="cli", now=time.time())
    if created and not indexed:  # a run that indexed nothing leaves nothing behind
        index.close()
        shutil.rmtree(folder, ignore_errors=True)
    took = time.perf_counter() - started
    made = "" if created and not indexed else (f" (generation {index.generation}"
                                                f"{'' if report.commit is not None else ', no commit'})")
    print(f"index {args.index}: {report.added} added, {report.updated} updated, {report.unchanged} unchanged, "
          f"{report.deleted} deleted, {report.chunks} chunks written in {took:.1f} s{made}")
    dense_report = getattr(index, "last_dense_report", None)  # a hybrid index (indexes.dense)
    if dense_report is not None:
        print(dense_report.line(args.index))
    elif dense.unembedded(args.index, folder):
        print(f"kbgate: note: {dense.embed_step(args.index, args.config)}", file=sys.stderr)
    for path, reason in report.errors:
        print(shown(f"  skipped {path}: {reason}"), file=sys.stderr)
    for where, message in report.warnings:
        print(shown(f"  warning {where}: {message}"), file=sys.stderr)
    if not indexed and (report.errors or not args.allow_empty):
        hint = "" if report.errors else " Pass --allow-empty if that is expected."
        print(shown(f"kbgate: {_empty_reason(args.paths, report)}; nothing was indexed"
                    f"{' and no index was created' if created else ''}.{hint}"), file=sys.stderr)
    if report.errors:
        return 1
    return 0 if indexed or args.allow_empty else 1


def cmd_index_embed(args: argparse.Namespace) -> int:
    """`kbgate index embed`: embed every chunk of an existing index that has no vectors (or
    vectors of another model) and publish them for its current commit; the index is hybrid from
    then on (a running server serves it hybrid after a restart). Nothing of the Tantivy index
    changes. Exit 2 when the index is configured `dense = "none"` or does not exist."""
    indexes_dir = load_indexer_config(args.config)[0]
    dense = load_indexes(args.config)[1]
    started = time.perf_counter()
    try:
        report, chosen = embed_index(indexes_dir, dense, args.index, wait=args.wait, progress=not args.no_progress,
                                     config=args.config)
    except EmbedRefused as exc:
        print(f"kbgate: {exc}", file=sys.stderr)
        return 2
    print(report.line(args.index))
    print(f"index {args.index}: hybrid ({chosen.provider} {chosen.model}) in {time.perf_counter() - started:.1f} s; "
          "restart kbgate serve to serve it hybrid")
    return 0


class EmbedRefused(ValueError):
    """An index `embed_index` does not embed: configured `dense = "none"`, or not there."""


def embed_index(indexes_dir: Path, dense: Any, name: str, *, wait: float, progress: bool = False,
                config: str = "the config") -> tuple[Any, Any]:
    """Embed every chunk of index `name` that lacks vectors of its model (blocking; what `kbgate
    index embed` and the console's re-embed run). dense: the config's DenseChoices. Returns (the
    dense report, the DenseConfig used). Raises EmbedRefused, IndexLockedError past `wait`
    seconds, EmbeddingError."""
    from indexes.dense import HybridStore
    from indexes.dense.config import DenseChoices, default_dense

    if name in dense.lexical:
        raise EmbedRefused(f'index {name} is configured dense = "none" in {config}: remove that line first')
    chosen = dense.configured.get(name) or dense.default or default_dense()
    store = HybridStore(indexes_dir, dense=DenseChoices({**dense.configured, name: chosen},
                                                        lexical=dense.lexical, default=dense.default))
    if not (store.folder(name) / "meta.json").is_file():
        raise EmbedRefused(f"no index {name} under {indexes_dir}: build it with kbgate index add "
                           "(a new index is hybrid by default)")
    index = store.create_or_open_for_write(name)
    try:
        _ingest_waiting(index, iter(()), argparse.Namespace(wait=wait, index=name), progress=progress)
        return index.last_dense_report, chosen  # type: ignore[attr-defined]
    finally:
        index.close()


def cmd_index_create(args: argparse.Namespace) -> int:
    """`kbgate index create`: make index NAME empty, under its configured dense settings (hybrid
    by default, as `index add` makes one). Exit 0 when made, 1 when it exists already (nothing
    changed), 2 for a name no index may have."""
    from indexes.dense import HybridStore

    indexes_dir = load_indexer_config(args.config)[0]
    store = HybridStore(indexes_dir, dense=load_indexes(args.config)[1], remote=load_backends(args.config))
    try:
        made = create_index(store, args.index)
    except IndexStoreError as exc:
        print(shown(f"kbgate: {exc}"), file=sys.stderr)
        return 2
    if not made:
        print(f"kbgate: index {args.index} exists already under {indexes_dir}: nothing changed", file=sys.stderr)
        return 1
    print(f"index {args.index}: created (empty) under {indexes_dir}")
    return 0


def create_index(store: Any, name: str) -> bool:
    """Make index `name` of `store` (an IndexStore or HybridStore) empty; False when it exists
    already (nothing changed). Raises IndexStoreError for a name no index may have, or one that
    cannot be written. An index served by Milvus exists once configured (its collection is made by
    its first write)."""
    if store.exists(name):
        return False
    store.create_or_open_for_write(name).close()
    return True


def _sized(items: Iterable[Any], sizes: dict[str, int]) -> Iterator[Any]:
    """`items` as read, noting each document's size (`indexes.ledger.size_of`) into `sizes`."""
    for item in items:
        if isinstance(item, Document):
            sizes[item.id] = ledger.size_of(item)
        yield item


def _ingest_waiting(index: Any, items: Any, args: argparse.Namespace, **options: Any) -> IngestReport:
    """`index.ingest(items, **options)`, tried again every 0.2 s for up to --wait seconds while
    another writer holds the index (IndexLockedError is raised before `items` is read, so a
    retry reads them from the start). Raises IndexLockedError once the wait is over."""
    from indexes.errors import IndexLockedError

    deadline = time.monotonic() + max(args.wait, 0.0)
    noted = False
    while True:
        try:
            report: IngestReport = index.ingest(items, **options)
            return report
        except IndexLockedError:
            if time.monotonic() >= deadline:
                raise
            if not noted:
                print(f"kbgate: index {args.index} is being written by another writer (a server's document API, "
                      f"a sync); waiting up to {args.wait:g} s", file=sys.stderr)
                noted = True
            time.sleep(0.2)


def _empty_reason(paths: list[str], report: IngestReport) -> str:
    """Why a run indexed no document: files it refused (each an error), files it skipped (each a
    warning), or none at all."""
    named = ", ".join(paths)
    if report.errors:
        n = len(report.errors)
        return f"{named} held {n} file{'s' if n != 1 else ''} or record{'s' if n != 1 else ''} that could not be " \
               "indexed (each is listed above, with why)"
    if any(where != "--delete-missing" for where, _ in report.warnings):
        return f"{named} held files but no document kbgate reads (each is listed above)"
    return f"{named} {'holds' if len(paths) == 1 else 'hold'} no file at all"


def cmd_index_list(args: argparse.Namespace) -> int:
    """`kbgate index list|stats`: one line per index; exit 1 when one would not open."""
    from indexes.store import IndexStore

    store = IndexStore(load_indexes_dir(args.config), remote=load_backends(args.config))  # a Milvus token only
    names = [args.index] if getattr(args, "index", None) else store.names()
    if not names:
        print(f"no indexes under {store.root}")
    failed = 0
    for name in names:
        try:
            s = store.open(name).stats()
        except IndexStoreError as exc:  # one bad index must not hide the others
            failed += 1
            print(f"{shown(name)}\t{shown(exc.reason.upper())}")
            print(shown(f"kbgate: {exc}"), file=sys.stderr)
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.last_commit)) if s.last_commit else "-"
        print(f"{s.name}\tdocuments={s.documents}\tchunks={s.chunks}\tgeneration={s.generation}\t"
              f"size={s.size_bytes / 1e6:.1f}MB\tlast_commit={when}")
    return 1 if failed else 0
