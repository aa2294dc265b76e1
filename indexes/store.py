"""Index storage: the folder of named indexes (`IndexStore`), each opened as a Tantivy
`KnowledgeIndex` (`indexes.knowledge`) or, when configured with a backend, served by an engine
(`indexes.backends`: Milvus). The server only reads (`open`, cached); the indexer writes
(`create_or_open_for_write` + `ingest`). One writer per index (a second one: `IndexLockedError`).
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import tantivy

from .backends import open_remote
from .errors import IndexStoreError
from .ingest.chunking import DEFAULT_MAX_CHARS
from .knowledge import RELOAD_CHECK_SECONDS, KnowledgeIndex
from .readonly import Shadow
from .records import document_revision
from .schema import CLEAN_AT_INGEST, CLEAN_RULES, check_index, open_index, open_or_create
from .types import DEFAULT_BOUNDS, MilvusConfig, SearchBounds, ServedIndex

__all__ = ["RELOAD_CHECK_SECONDS", "IndexStore", "KnowledgeIndex", "document_revision"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class IndexStore:
    """The folder of named indexes. `open` results are cached (one reader per index).

    bounds: the per-query work bounds of every index opened here (`SearchBounds`).
    Every index opens as a lexical `KnowledgeIndex`; `indexes.dense.HybridStore` opens those
    configured hybrid as `HybridIndex` instead (it overrides `_make`).
    """

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic,
                 bounds: SearchBounds = DEFAULT_BOUNDS, remote: Mapping[str, MilvusConfig] | None = None) -> None:
        self.root, self.remote = Path(root), dict(remote or {})
        self._clock = clock
        self.bounds = bounds
        self._open: dict[str, ServedIndex] = {}
        self._checked: dict[Path, Shadow] = {}  # read-only folders' shadows kept by `check`
        self._lock = threading.Lock()

    def folder(self, name: str) -> Path:
        """root/name, whether or not an index is there. Raises IndexStoreError for a name that is not one."""
        if not _NAME.fullmatch(name):
            raise IndexStoreError(name, f"Index name {name!r} must match {_NAME.pattern}.")
        return self.root / name

    def names(self) -> list[str]:
        """Sorted names of the indexes under root (folders holding a meta.json)."""
        if not self.root.is_dir():
            return []
        return sorted({p.name for p in self.root.iterdir() if (p / "meta.json").is_file()} | set(self.remote))

    def exists(self, name: str) -> bool:
        """Does index `name` exist: a folder holding a meta.json, or an index configured with a
        backend (its collection is made by its first write)."""
        return name in self.remote or (self.folder(name) / "meta.json").is_file()

    def open(self, name: str) -> ServedIndex:
        """The index `name`, opened once and cached (a read-only folder through a shadow: `indexes.readonly`).
        Raises IndexNotFoundError, SchemaVersionError, IndexCorruptError, IndexReadOnlyError."""
        with self._lock:
            cached = self._open.get(name)
            if cached is not None:
                return cached
            folder = self.folder(name)
            if name in self.remote:  # served by an engine (indexes.backends), not a folder here
                self._open[name] = open_remote(name, self.remote[name], folder, bounds=self.bounds, clock=self._clock)
                return self._open[name]
            index, chunk_chars, meta, shadow = open_index(folder, name, DEFAULT_MAX_CHARS)
            ki = self._make(name, folder, index, chunk_chars, shadow=shadow)
            ki.clean_at_ingest = meta.get(CLEAN_AT_INGEST) == CLEAN_RULES  # `true` (rules 1) is not 2
            self._open[name] = ki
            return ki

    def check(self, name: str) -> None:
        """Open the folder of `name` afresh, as a new worker would: is the index on disk whole now (an opened
        index keeps serving the files it mapped even after they were damaged or deleted)? About 1-2 ms for the
        test corpora. Raises IndexNotFoundError, SchemaVersionError, IndexCorruptError, IndexReadOnlyError."""
        if name in self.remote:  # the engine answers for its collection
            self.open(name).check()  # type: ignore[attr-defined]
            return
        check_index(self.folder(name), name, self._checked)

    def close(self) -> None:
        """Release what the opened indexes hold (`HybridIndex.close`: its encoder threads and model) and
        forget them; a later `open` opens afresh."""
        with self._lock:
            opened = list(self._open.values())
            self._open.clear()
        for idx in opened:
            idx.close()
        while self._checked:
            self._checked.popitem()[1].close()

    def forget(self, name: str) -> None:
        """Close the opened index `name` and drop it from the cache (its folder is going away); a
        later `open` opens afresh (and finds nothing)."""
        with self._lock:
            opened = self._open.pop(name, None)
        if opened is not None:
            opened.close()

    def create_or_open_for_write(self, name: str, *, chunk_chars: int = DEFAULT_MAX_CHARS) -> ServedIndex:
        """Open `name` for `ingest`, creating the folder, schema and sidecar if absent. chunk_chars applies to
        a new index; an existing one keeps the size in its sidecar. Raises SchemaVersionError for an index
        of another schema version, IndexCorruptError for one Tantivy cannot open, IndexReadOnlyError for a
        folder this process cannot write."""
        folder = self.folder(name)
        if name in self.remote:
            return open_remote(name, self.remote[name], folder, create=True, bounds=self.bounds, clock=self._clock)
        index, chunk_chars = open_or_create(folder, name, chunk_chars)
        return self._make(name, folder, index, chunk_chars, warm=False)

    def _make(self, name: str, folder: Path, index: tantivy.Index, chunk_chars: int, *,
              warm: bool = True, shadow: Shadow | None = None) -> KnowledgeIndex:
        """The index object over an opened Tantivy `index` (warm: it will serve searches, not only an ingest;
        shadow: see KnowledgeIndex); the one place a subclass chooses another KnowledgeIndex class."""
        return KnowledgeIndex(name, folder, index, clock=self._clock, chunk_chars=chunk_chars, bounds=self.bounds,
                              shadow=shadow)

