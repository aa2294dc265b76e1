"""`kbgate index publish|fetch`: how a new commit reaches every replica without a rebuild on
each (registered by gateway/ops/index_commands.py). The generation format and
the atomic install: indexes/generations.py, indexes/fetch.py; the steps: docs/indexes.md,
"Publishing to replicas", and deploy/README.md, "How indexes reach replicas".

Rationale: docs/design-notes.md, "gateway/ops/replicas.py".
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from gateway.core.config import load_indexes_dir
from indexes.errors import IndexStoreError
from indexes.types import GenerationSource, SourceMissing

__all__ = ["HttpSource", "commit_line", "register", "source_for"]

HTTP_TIMEOUT = 30.0  # seconds to connect and between two reads of one file


class HttpSource:
    """A store served over HTTP(S): GET `base/<path>` (redirects followed), streamed.

    base: the URL the store's root folder is served at. timeout: seconds to connect and
    between two reads. A 404 is SourceMissing, any other status or a network failure OSError;
    messages name the URL without its credentials or query.
    """

    def __init__(self, base: str, timeout: float = HTTP_TIMEOUT) -> None:
        self.base = base.rstrip("/")
        self._timeout = timeout
        self._client: Any = None  # one httpx.Client, made at the first read: connections are reused

    def describe(self) -> str:
        return safe_url(self.base)

    def read(self, path: str, write: Callable[[bytes], None]) -> None:
        import httpx  # here: every `kbgate` command builds the parser that imports this module

        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout, follow_redirects=True)
        url = f"{self.base}/{path}"
        try:
            with self._client.stream("GET", url) as r:
                if r.status_code == 404:
                    raise SourceMissing(path)
                if r.status_code != 200:
                    raise OSError(f"HTTP {r.status_code} from {safe_url(url)}")
                for block in r.iter_bytes(1 << 20):
                    write(block)
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise OSError(f"{type(exc).__name__} reading {safe_url(url)}") from None


def safe_url(url: str) -> str:
    """`url` without user:password@, query or fragment: 'https://u:p@h/s?sig=x' → 'https://h/s'."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2], parts.path, "", ""))


def source_for(store: str) -> GenerationSource:
    """The source of a store given on the command line: an http(s):// URL or a folder."""
    from indexes.fetch import FolderSource

    if store.startswith(("http://", "https://")):
        return HttpSource(store)
    return FolderSource(Path(store))


def register(ixs: Any) -> None:
    """Add `publish` and `fetch` to the `kbgate index` subparsers `ixs`."""
    p = ixs.add_parser("publish", help="write the index's current commit to a store replicas fetch from")
    p.add_argument("--config", required=True)
    p.add_argument("--index", required=True)
    p.add_argument("--keep", type=int, default=3, help="generations kept in the store (default 3)")
    p.add_argument("store", metavar="STORE", help="the store's folder (a shared volume)")
    p.set_defaults(func=cmd_publish)
    f = ixs.add_parser("fetch", help="install the newest published commit of an index into indexes.dir")
    f.add_argument("--config", required=True)
    f.add_argument("--index", required=True)
    f.add_argument("--every", type=float, default=None, metavar="SECONDS",
                   help="keep running: fetch again every SECONDS (a failed fetch is reported and retried)")
    f.add_argument("store", metavar="STORE", help="the store's folder, or the http(s):// URL it is served at")
    f.set_defaults(func=cmd_fetch)


def cmd_publish(args: argparse.Namespace) -> int:
    """`kbgate index publish`. Returns the exit code."""
    from indexes.generations import publish
    from indexes.store import IndexStore

    if args.keep < 1:
        print("kbgate: --keep must be at least 1", file=sys.stderr)
        return 2
    if args.store.startswith(("http://", "https://")):
        print("kbgate: publish writes to a folder (a shared volume, or one you sync to an object store: "
              "docs/indexes.md, \"Publishing to replicas\")", file=sys.stderr)
        return 2
    store = IndexStore(load_indexes_dir(args.config))  # the indexer needs no secrets
    done = publish(store.folder(args.index), args.index, Path(args.store), keep=args.keep)
    where = Path(args.store) / args.index
    if done.already:
        print(f"index {args.index}: commit {done.commit} is published already at {where} "
              f"({done.files} files, {done.total_bytes / 1e6:.1f} MB)")
    else:
        print(f"index {args.index}: published commit {done.commit} to {where}: {done.files} files "
              f"({done.total_bytes / 1e6:.1f} MB), {done.new_objects} new ({done.copied_bytes / 1e6:.1f} MB copied)"
              + (f", {done.pruned} old generation(s) pruned" if done.pruned else ""))
    return 0


def cmd_fetch(args: argparse.Namespace) -> int:
    """`kbgate index fetch` (once, or every --every seconds). Returns the exit code of the fetch
    (0 or 1); with --every, 0 after SIGTERM (the fetch under way completes first; an interrupted
    one would be safe too), 130 on Ctrl-C."""
    from indexes.store import IndexStore

    if args.every is not None and not args.every >= 1:
        print("kbgate: --every must be at least 1 second", file=sys.stderr)
        return 2
    store = IndexStore(load_indexes_dir(args.config))  # a replica's fetcher needs no secrets
    store.folder(args.index)  # a valid index name, or IndexStoreError (exit 1)
    source = source_for(args.store)
    if args.every is None:
        return _fetch_once(store.root, args.index, source)
    stop = threading.Event()  # SIGTERM (a pod stopping): finish the fetch under way, then exit 0
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    while not stop.is_set():
        _fetch_once(store.root, args.index, source)
        sys.stdout.flush()
        stop.wait(args.every)
    return 0


def _fetch_once(root: Path, name: str, source: GenerationSource) -> int:
    from indexes.fetch import fetch

    started = time.perf_counter()
    try:
        done = fetch(source, root, name)
    except IndexStoreError as exc:  # refused or locked: the message says what keeps serving
        print(f"kbgate: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # this machine's disk (full, read-only): reported, and --every tries again
        print(f"kbgate: index {name!r}: fetch failed on this machine: {exc.strerror or exc}"
              f"{f': {exc.filename}' if exc.filename else ''}", file=sys.stderr)
        return 1
    if done.already:
        print(f"index {name}: at commit {done.commit} already ({source.describe()})")
    else:
        print(f"index {name}: fetched commit {done.commit} from {source.describe()} "
              f"(was {done.previous or 'none'}): {done.downloaded} files downloaded "
              f"({done.downloaded_bytes / 1e6:.1f} MB), {done.reused} unchanged, in "
              f"{time.perf_counter() - started:.1f} s; running workers serve it within a second")
    return 0


def commit_line(folder: Path, name: str) -> str | None:
    """`check-config`'s line on the commit index `name` holds on disk: 'index kb: commit
    7-1a2b3c4d5e6f (fetched from STORE at 2026-12-02 04:03:00)'; None when it has none."""
    from indexes.fetch import fetch_record
    from indexes.stats import read_commit

    commit = read_commit(folder)[1]
    if commit is None:
        return None
    rec = fetch_record(folder)
    if rec.get("commit") == commit and isinstance(rec.get("fetched_at"), (int, float)):
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec["fetched_at"]))
        return f"index {name}: commit {commit} (fetched from {rec.get('source')} at {when})"
    return f"index {name}: commit {commit} (not fetched by kbgate index fetch)"
