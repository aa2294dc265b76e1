"""Counts of one index for `kbgate index stats`, /readyz and metrics."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

import orjson
import tantivy
from tantivy import Query

from .documents import count_matches
from .types import IndexStats

__all__ = ["commit_label", "index_stats", "meta_digest", "meta_mtime", "read_commit", "read_generation"]


def index_stats(name: str, folder: Path, searcher: tantivy.Searcher, schema: tantivy.Schema) -> IndexStats:
    """Documents (chunk-0 count), chunks, generation (commit opstamp from meta.json), last
    commit time (meta.json mtime, unix seconds; None when unreadable) and size on disk in
    bytes: the files directly in `folder` (Tantivy's) and every file under `folder/dense`
    (the vectors of a hybrid index, `indexes.dense.vectors`). Never raises OSError: what is
    gone from disk counts 0 (generation 0 when meta.json is unreadable)."""
    docs = count_matches(searcher, Query.term_query(schema, "chunk", 0))
    last: float | None
    try:
        meta_path = folder / "meta.json"
        raw = meta_path.read_bytes()
        opstamp = int(json.loads(raw).get("opstamp", 0))
        last = meta_path.stat().st_mtime
        commit: str | None = commit_label(opstamp, raw)
    except (OSError, ValueError):
        opstamp, last, commit = 0, None, None
    # "dense" is indexes.dense.vectors.DENSE_DIR (not imported: the dense package imports this one)
    size = _files_bytes(folder) + _tree_bytes(folder / "dense")
    return IndexStats(name, docs, int(searcher.num_docs), opstamp, last, size, commit)


def _files_bytes(folder: Path) -> int:
    """Bytes of the files directly in `folder`: 0 when the folder is gone (deleted under a
    running reader, which still answers from the files it mapped), and a file removed
    meanwhile (an old segment deleted by a writer's commit) counts 0."""
    try:
        return _sizes(list(folder.iterdir()))
    except OSError:
        return 0


def _tree_bytes(folder: Path) -> int:
    """Bytes of every file under `folder` (0 when absent); a file removed meanwhile (an old
    vector generation pruned by the writer) counts 0."""
    if not folder.is_dir():  # a lexical index: one stat
        return 0
    return _sizes(folder.rglob("*"))


def _sizes(paths: Iterable[Path]) -> int:
    """Summed sizes of the regular files among `paths`; one that vanishes meanwhile counts 0."""
    total = 0
    for p in paths:
        try:
            if p.is_file():
                total += p.stat().st_size
        except OSError:
            continue
    return total


def meta_digest(folder: Path) -> bytes | None:
    """A 16-byte digest of `folder/meta.json` (None when unreadable): it names one commit of
    one index incarnation, where the opstamp alone does not (a folder rebuilt from scratch, or
    restored from a backup, starts again at the same opstamps with other content)."""
    try:
        return hashlib.blake2b((Path(folder) / "meta.json").read_bytes(), digest_size=16).digest()
    except OSError:
        return None


def commit_label(opstamp: int, meta: bytes) -> str:
    """'{opstamp}-{first 12 hex digits of the BLAKE2b digest of meta.json}': names one commit of
    one index incarnation (the opstamp alone repeats in a folder rebuilt from scratch). A
    replica that fetched the commit holds the same meta.json bytes, so the same label."""
    return f"{opstamp}-{hashlib.blake2b(meta, digest_size=16).hexdigest()[:12]}"


def read_commit(folder: Path) -> tuple[int | None, str | None]:
    """(opstamp, `commit_label`) of the commit `folder/meta.json` names, from one read;
    (None, None) when unreadable."""
    try:
        raw = (Path(folder) / "meta.json").read_bytes()
        opstamp = int(orjson.loads(raw)["opstamp"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, None
    return opstamp, commit_label(opstamp, raw)


def read_generation(folder: Path) -> int | None:
    """The opstamp of the Tantivy commit `folder/meta.json` names (it grows with every commit),
    or None when unreadable. One small file read: no searcher, no counting."""
    try:
        return int(orjson.loads((Path(folder) / "meta.json").read_bytes())["opstamp"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def meta_mtime(folder: Path) -> int:
    """The mtime (ns) of folder/meta.json, 0 when it cannot be read: what a reader polls."""
    try:
        return (folder / "meta.json").stat().st_mtime_ns
    except OSError:
        return 0
