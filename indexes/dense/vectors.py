"""The vector set of one index generation: chunk vectors, their HNSW graph, their manifest.

Rationale: docs/design-notes.md, "indexes/dense/vectors.py".
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson

from ..schema import doc_key
from .calibration import CosineLine, read_line, write_line

__all__ = ["DENSE_DIR", "EXACT_BELOW", "Entry", "VectorSet", "current_generation", "load_current", "publish"]

DENSE_DIR = "dense"
FORMAT = 1
EXACT_BELOW = 5_000
CONNECTIVITY = 16  # HNSW M
EXPANSION_ADD = 128  # ef_construction
EXPANSION_SEARCH = 128  # ef_search (k = candidates <= 200)
REBUILD_REMOVED_SHARE = 0.25  # rebuild the graph instead of patching once this share was replaced


@dataclass(frozen=True, slots=True)
class Entry:
    """One chunk's vector: chunk_id ('{doc_id}#{n}'), doc_id, vector (dim,) float32."""

    chunk_id: str
    doc_id: str
    vector: npt.NDArray[np.float32]


class VectorSet:
    """A loaded generation (read-only). Thread-safe for `search`.

    generation: the Tantivy opstamp it belongs to. fingerprint: its vector space.
    revision_of[doc_id]: the document revision its vectors were computed from.
    line: the cosine line measured for this set (None: not measured).
    """

    def __init__(self, folder: Path, manifest: dict[str, Any], index: Any, line: CosineLine | None = None) -> None:
        self.folder = folder
        self.generation = int(manifest["generation"])
        self.fingerprint = str(manifest["fingerprint"])
        self.dim = int(manifest["dim"])
        self.next_key = int(manifest["next_key"])
        self.revision_of: dict[str, str] = dict(manifest["docs"])
        self.chunk_of: dict[int, tuple[str, str]] = {int(k): (c, d) for k, c, d in manifest["chunks"]}
        self._index = index
        self.line = line
        self._at: dict[tuple[int, int], int] | None = None  # (doc_key, chunk) → key, `keys_at`

    def __len__(self) -> int:
        return len(self.chunk_of)

    def search(self, query: npt.NDArray[np.float32], k: int) -> list[tuple[str, str, float]]:
        """Up to k nearest chunks of `query` (dim,), best first: (chunk_id, doc_id, cosine)."""
        if not self.chunk_of or k <= 0 or self._index is None:
            return []
        k = min(k, len(self.chunk_of))
        matches = self._index.search(query, k, exact=len(self.chunk_of) < EXACT_BELOW)
        out: list[tuple[str, str, float]] = []
        for key, distance in zip(matches.keys.tolist(), matches.distances.tolist(), strict=True):
            found = self.chunk_of.get(int(key))
            if found is not None:
                out.append((found[0], found[1], 1.0 - float(distance)))
        return out

    def keys_at(self, chunks: Sequence[tuple[int, int]]) -> list[int | None]:
        """The vector key of each (doc_key, chunk number) (`indexes.schema.doc_key`; the fast
        fields of a Tantivy chunk), None where this set holds no vector for it. The map is built
        on first use (one BLAKE2b digest per document) and kept with the set."""
        if self._at is None:
            by_doc: dict[str, int] = {}
            at: dict[tuple[int, int], int] = {}
            for key, (chunk_id, doc_id) in self.chunk_of.items():
                dk = by_doc.get(doc_id)
                if dk is None:
                    dk = by_doc[doc_id] = doc_key(doc_id)
                at[(dk, int(chunk_id.rpartition("#")[2] or 0))] = key
            self._at = at
        return [self._at.get(c) for c in chunks]

    def vectors(self, keys: Sequence[int]) -> npt.NDArray[np.float32]:
        """The stored vectors of `keys` (len(keys), dim)."""
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        got = self._index.get(np.asarray(keys, dtype=np.uint64))
        return np.asarray(got, dtype=np.float32).reshape(len(keys), self.dim)


def _dense(folder: Path) -> Path:
    return Path(folder) / DENSE_DIR


def current_generation(index_folder: Path) -> tuple[int, str] | None:
    """(generation, folder name) that dense/CURRENT names, or None when absent or unreadable."""
    try:
        raw = orjson.loads((_dense(index_folder) / "CURRENT").read_bytes())
        return int(raw["generation"]), str(raw["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def load_current(index_folder: Path, *, view: bool = True) -> VectorSet | None:
    """The generation CURRENT names, memory-mapped (view=True) or read into memory, or None
    when there is none or it cannot be read (a reader then answers lexically)."""
    cur = current_generation(index_folder)
    if cur is None:
        return None
    return load(_dense(index_folder) / cur[1], view=view)


def load(folder: Path, *, view: bool = True) -> VectorSet | None:
    """One generation folder, or None when it is incomplete or unreadable."""
    from usearch.index import Index

    try:
        manifest = orjson.loads((folder / "manifest.json").read_bytes())
        if manifest.get("format") != FORMAT:
            return None
        graph = folder / "vectors.usearch"
        index: Any = None
        if manifest["chunks"]:
            index = Index.restore(str(graph), view=view)
            if index is None:
                return None
            index.expansion_search = EXPANSION_SEARCH  # a search setting: not kept in the file
        return VectorSet(folder, manifest, index, read_line(folder))
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None


def _new_graph(dim: int) -> Any:
    from usearch.index import Index

    return Index(ndim=dim, metric="cos", dtype="f32", connectivity=CONNECTIVITY,
                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


def publish(index_folder: Path, generation: int, fingerprint: str, dim: int, docs: dict[str, str],
            keep: Iterable[int], previous: VectorSet | None, added: Sequence[Entry], *, threads: int = 0,
            line: CosineLine | None = None) -> Path:
    """Write the vector set of `generation` and make it CURRENT; returns its folder.

    docs: doc_id → revision of every document the set covers. keep: keys of `previous` whose
    chunks are unchanged. added: new chunk vectors (new keys are given here). When
    `previous` (of the same fingerprint, read into memory with view=False, and consumed: its
    graph is patched in place) is given and the set changes by
    less than REBUILD_REMOVED_SHARE, its graph is patched (removals + additions); else the
    graph is rebuilt from all vectors. threads: for the graph build (0 = all cores).
    line: the cosine line of the new set, stored with it (None: none).
    """
    base = _dense(index_folder)
    base.mkdir(parents=True, exist_ok=True)
    name = f"g-{generation}-{secrets.token_hex(4)}"
    tmp = base / f".{name}.tmp"
    tmp.mkdir()
    try:
        keep = sorted(set(keep))
        next_key = previous.next_key if previous is not None else 0
        new_keys = list(range(next_key, next_key + len(added)))
        chunks: list[list[Any]] = []
        if previous is not None:
            chunks += [[k, *previous.chunk_of[k]] for k in keep]
        chunks += [[k, e.chunk_id, e.doc_id] for k, e in zip(new_keys, added, strict=True)]
        total = len(chunks)
        if total:
            removed = 0 if previous is None else len(previous) - len(keep)
            patch = (previous is not None and previous.fingerprint == fingerprint and len(previous) > 0
                     and (removed + len(added)) < REBUILD_REMOVED_SHARE * max(len(previous), 1))
            if patch:
                assert previous is not None
                graph = previous._index  # the writer's private in-memory copy (view=False): patched in place
                gone = sorted(set(previous.chunk_of) - set(keep))
                if gone:
                    graph.remove(np.asarray(gone, dtype=np.uint64))
            else:
                graph = _new_graph(dim)
                if previous is not None and keep:
                    graph.add(np.asarray(keep, dtype=np.uint64), previous.vectors(keep), threads=threads)
            if added:
                vecs = np.vstack([e.vector for e in added]).astype(np.float32)
                graph.add(np.asarray(new_keys, dtype=np.uint64), vecs, threads=threads)
            graph.save(str(tmp / "vectors.usearch"))
        manifest = {"format": FORMAT, "generation": generation, "fingerprint": fingerprint, "dim": dim,
                    "next_key": next_key + len(added), "docs": docs, "chunks": chunks}
        (tmp / "manifest.json").write_bytes(orjson.dumps(manifest))
        if line is not None:
            write_line(tmp, line)
        for f in tmp.iterdir():
            _fsync(f)
        final = base / name
        tmp.rename(final)
        _swap_current(base, generation, name)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _prune(base, keep_names={name, previous.folder.name if previous is not None else ""})
    return final


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_current(base: Path, generation: int, name: str) -> None:
    tmp = base / "CURRENT.tmp"
    tmp.write_bytes(orjson.dumps({"generation": generation, "folder": name}))
    _fsync(tmp)
    tmp.replace(base / "CURRENT")
    with contextlib.suppress(OSError):  # make the rename itself durable
        _fsync(base)


def _prune(base: Path, keep_names: set[str]) -> None:
    """Remove generation folders other than `keep_names` (and leftovers of failed writers)."""
    for p in base.iterdir():
        if p.is_dir() and p.name not in keep_names and (p.name.startswith("g-") or p.name.endswith(".tmp")):
            shutil.rmtree(p, ignore_errors=True)
