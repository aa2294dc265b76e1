"""Keeping an index's vectors in step with its Tantivy commits (the writer's side).

Rationale: docs/design-notes.md, "indexes/dense/sync.py".
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import tantivy

from ..documents import chunks_of, stored_str
from ..documents import revisions as indexed_revisions
from ..errors import IndexLockedError
from ..ingest.chunking import chunk
from ..stats import read_commit, read_generation
from ..types import Document, IngestError, IngestWarning
from .cache import EmbeddingCache, text_key
from .calibration import CosineLine, line_for, stored_texts
from .config import DenseConfig
from .costs import BuildCosts
from .parallel import POOL_FROM, PassagePool, build_workers
from .providers import Embedder, LocalEmbedder
from .texts import passage_text
from .vectors import DENSE_DIR, Entry, load_current, publish

__all__ = ["DenseIngest", "DenseReport", "ingest_lock", "read_generation", "searcher_at_commit",
           "searcher_at_generation"]

STAGE_FLUSH_TEXTS = 256  # texts gathered before one round of embedding


@dataclass(slots=True)
class DenseReport:
    """What one publish did: generation published, chunks covered, how many vectors were
    computed by the provider vs found in the cache or kept from the previous set, seconds."""

    generation: int = 0
    chunks: int = 0
    embedded: int = 0
    cached: int = 0
    kept: int = 0
    publish_seconds: float = 0.0
    cosine_line: CosineLine | None = None
    costs: BuildCosts | None = None

    def line(self, name: str) -> str:
        """What the publish did, and on a second line what the build cost (`BuildCosts.line`)."""
        done = (f"index {name}: vectors of generation {self.generation}: {self.chunks} chunks ({self.kept} kept, "
                f"{self.cached} from the embedding cache, {self.embedded} embedded), published in "
                f"{self.publish_seconds:.1f} s; " + _line_text(self.cosine_line))
        return done if self.costs is None else f"{done}\n{self.costs.line(name)}"


def _line_text(line: CosineLine | None) -> str:
    if line is None:
        return "cosine line not measured (fewer documents than a measure needs): the model's line is used"
    return f"cosine line {line.zero:.4f} → 0, {line.one:.4f} → 1 ({line.source}, {line.probes} probes)"


@contextlib.contextmanager
def ingest_lock(index_folder: Path, name: str) -> Iterator[None]:
    """Hold `dense/LOCK` (flock) for a whole ingest + publish, so two writers never interleave
    their vector generations. Raises IndexLockedError at once when another process holds it."""
    folder = Path(index_folder) / DENSE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / "LOCK", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexLockedError(name, str(index_folder)) from None
        yield
    finally:
        os.close(fd)


def searcher_at_generation(index: tantivy.Index, index_folder: Path, *, reload: bool | Callable[[], None] = True,
                           attempts: int = 5) -> tuple[int | None, tantivy.Searcher]:
    """(generation, searcher) where the searcher is known to show exactly that commit.

    meta.json is read before and after `index.reload()`: when both name the same opstamp, no
    commit landed in between, so the reload loaded that one. Otherwise it is tried again;
    None as generation means it could not be pinned down (the caller answers lexically).
    """
    generation, _, searcher = searcher_at_commit(index, index_folder, reload=reload, attempts=attempts)
    return generation, searcher


def searcher_at_commit(index: tantivy.Index, index_folder: Path, *, reload: bool | Callable[[], None] = True,
                       attempts: int = 5) -> tuple[int | None, str | None, tantivy.Searcher]:
    """(generation, commit label, searcher): `searcher_at_generation` with the `commit_label`
    of the same meta.json read. When the generation cannot be pinned down it is None and the
    label is the one read before the last reload (never newer than the searcher shows).
    reload: True (`index.reload()`), False (none), or the reload to run
    (`KnowledgeIndex.reload_reader`: a read-only folder's shadow is refreshed first)."""
    commit: str | None = None
    for _ in range(attempts):
        before, commit = read_commit(index_folder)
        if callable(reload):
            reload()
        elif reload:
            index.reload()
        searcher = index.searcher()
        if before is not None and before == read_generation(index_folder):
            return before, commit, searcher
    return None, commit, index.searcher()


def indexed_chunks(searcher: tantivy.Searcher, schema: tantivy.Schema, doc_id: str) -> list[tuple[str, str]]:
    """(chunk_id, text to embed) of every chunk of `doc_id` in the searcher's commit."""
    return [(str(d.get_first("chunk_id")),
             passage_text(stored_str(d, "title") or "", stored_str(d, "heading") or "", stored_str(d, "text") or ""))
            for d in chunks_of(searcher, schema, doc_id)]


class DenseIngest:
    """The vector side of one ingest of one index (see module doc).

    index_folder: the index. config/embedder/cache: the index's dense settings and provider.
    chunk_chars: the index's chunk size (the writer's). known: doc_id → revision before this
    ingest (documents staged are those whose revision differs). progress: a tqdm bar on a TTY.
    workers: processes a local model embeds on once a round holds POOL_FROM texts
    (`indexes.dense.parallel`; None: every core). `close()` stops them.
    """

    def __init__(self, index_folder: Path, config: DenseConfig, embedder: Embedder, cache: EmbeddingCache,
                 *, chunk_chars: int, known: dict[str, str], progress: bool = False,
                 workers: int | None = None) -> None:
        self.folder = Path(index_folder)
        self.config, self.embedder, self.cache = config, embedder, cache
        self.chunk_chars = chunk_chars
        self.known = dict(known)
        self.progress = progress
        self.report = DenseReport()
        self._pending: dict[bytes, str] = {}
        self._embedded: set[bytes] = set()  # keys this run computed
        self._bar: Any = None
        self.workers = build_workers() if workers is None else max(workers, 1)
        self._pool: PassagePool | None = None
        self._cpu = self._wall = 0.0  # the model's CPU seconds (every process) and elapsed seconds

    # ---- step 1: embed what the ingest is about to write -----------------

    def stream(self, items: Iterable[Document | IngestError | IngestWarning],
               ) -> Iterator[Document | IngestError | IngestWarning]:
        """`items` unchanged, staging (and embedding in rounds) the chunks of changed documents.
        The last round runs when `items` is exhausted, before the writer commits. Raises
        EmbeddingError when the provider fails after its retries (the ingest then rolls back)."""
        from ..store import document_revision

        for item in items:
            if isinstance(item, Document) and self.known.get(item.id) != document_revision(item):
                for c in chunk(item, max_chars=self.chunk_chars):
                    text = passage_text(item.title, c.heading, c.text)
                    self._pending[text_key(text)] = text
                if len(self._pending) >= STAGE_FLUSH_TEXTS:
                    self._embed_pending()
            yield item
        self._embed_pending()
        self._close_bar()

    def _embed_pending(self) -> None:
        if not self._pending:
            return
        keys = list(self._pending)
        have = self.cache.get_many(keys)
        todo = [k for k in keys if k not in have]
        self._embed([(k, self._pending[k]) for k in todo])
        self._pending.clear()

    def _embed(self, todo: list[tuple[bytes, str]]) -> dict[bytes, npt.NDArray[np.float32]]:
        """Embed (key, text) pairs in batches, on the process pool when the round is large
        enough (`indexes.dense.parallel`), storing each batch in the cache at once (an
        interrupted run keeps what it paid for)."""
        out: dict[bytes, npt.NDArray[np.float32]] = {}
        step = max(self.config.batch_size, 1)
        parts = [todo[start:start + step] for start in range(0, len(todo), step)]
        if self._pool is None and self.workers > 1 and type(self.embedder) is LocalEmbedder and len(todo) >= POOL_FROM:
            self._pool = PassagePool(self.config, self.workers)  # its start counts in the wall time
        elif self._pool is None and todo:
            self.embedder.warm()  # loading the model is not the chunks' cost
        t0 = time.perf_counter()
        for part, (vectors, cpu) in zip(parts, self._vectors([[t for _, t in part] for part in parts]), strict=True):
            pairs = [(k, v) for (k, _), v in zip(part, vectors, strict=True)]
            self.cache.put_many(pairs)
            out.update(pairs)
            self._embedded.update(k for k, _ in part)
            self.report.embedded += len(part)
            self._cpu += cpu
            self._tick(len(part))
        self._wall += time.perf_counter() - t0
        return out

    def _vectors(self, batches: list[list[str]]) -> Iterator[tuple[npt.NDArray[np.float32], float]]:
        """(vectors, CPU seconds) of each batch, in order: on the pool once one runs (a round
        of POOL_FROM texts started it), else in this thread (`time.thread_time`: the local model
        computes in the calling thread; a served model's CPU is the server's)."""
        if self._pool is not None:
            yield from self._pool.embed(batches)
            return
        for batch in batches:
            t0 = time.thread_time()
            vectors = self.embedder.embed_passages(batch)
            yield vectors, time.thread_time() - t0

    def close(self) -> None:
        """Stop the pool's processes, if any ran."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def _tick(self, n: int) -> None:
        if not (self.progress and sys.stderr.isatty()):
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(unit="chunk", file=sys.stderr, desc=f"embed ({self.config.model})")
        self._bar.update(n)

    def _close_bar(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    # ---- step 3: publish the vectors of the commit ------------------------

    def publish(self, index: tantivy.Index) -> DenseReport:
        """Reconcile and publish the vector set of the index's latest commit (see module doc).
        Raises EmbeddingError when chunks that must be embedded now cannot be."""
        t0 = time.perf_counter()
        generation, searcher = searcher_at_generation(index, self.folder)
        if generation is None:
            raise RuntimeError("the index kept changing while its vectors were published")
        schema = index.schema
        revisions = indexed_revisions(searcher, schema)  # doc_id → revision (chunk 0)
        previous = load_current(self.folder, view=False)
        if previous is not None and previous.fingerprint != self.embedder.fingerprint:
            previous = None  # another model: nothing carries over
        kept_docs = {d for d, r in revisions.items() if previous is not None and previous.revision_of.get(d) == r}
        keep = [] if previous is None else [k for k, (_, d) in previous.chunk_of.items() if d in kept_docs]
        texts: list[tuple[str, str, bytes, str]] = []  # chunk_id, doc_id, key, text
        for doc_id in sorted(set(revisions) - kept_docs):
            for chunk_id, text in indexed_chunks(searcher, schema, doc_id):
                texts.append((chunk_id, doc_id, text_key(text), text))
        keys = list(dict.fromkeys(k for _, _, k, _ in texts))
        have = self.cache.get_many(keys)
        self.report.cached = sum(1 for k in keys if k in have and k not in self._embedded)
        missing = list({k: t for _, _, k, t in texts if k not in have}.items())  # each text once
        if missing:
            have.update(self._embed(missing))
            self._close_bar()
        added = [Entry(cid, did, have[k]) for cid, did, k, _ in texts]
        dim = added[0].vector.shape[0] if added else (previous.dim if previous is not None else 0)
        timeout = self.config.timeout_seconds
        line = line_for(previous, keep, added, lambda ids: stored_texts(searcher, schema, ids),
                        lambda text: self.embedder.embed_query(text, timeout))
        folder = publish(self.folder, generation, self.embedder.fingerprint, dim, revisions, keep, previous, added,
                         line=line)
        self.report.cosine_line = line
        self.report.generation = generation
        self.report.kept = len(keep)
        self.report.chunks = len(keep) + len(added)
        self.report.publish_seconds = time.perf_counter() - t0
        self.report.costs = BuildCosts.measure(
            folder, chunks=self.report.chunks, embedded=self.report.embedded, cpu_seconds=self._cpu,
            wall_seconds=self._wall, workers=self.workers if self._pool is not None else 1,
            served=self.config.provider != "local")
        return self.report
