"""`HybridIndex`: a `KnowledgeIndex` whose one search entry fuses BM25 with dense vectors.

Rationale: docs/design-notes.md, "indexes/dense/index.py".
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy
from tantivy import Query

from ..hits import make_hit
from ..ingest.chunking import DEFAULT_MAX_CHARS
from ..readonly import Shadow
from ..schema import refuse_read_only
from ..search import build_query, ideal_score, question_of
from ..store import IndexStore, KnowledgeIndex
from ..synonyms import analysed
from ..types import (
    NO_DIALS,
    ChangeSet,
    Dials,
    Document,
    Hit,
    IngestError,
    IngestReport,
    IngestWarning,
    MetaFilter,
    SearchFilter,
    ServedIndex,
)
from .cache import EmbeddingCache
from .calibration import CosineLine, measure, stored_texts, write_line
from .config import DenseChoices, DenseConfig
from .hybrid import DenseSearch, Observe
from .providers import Embedder, Vectors, make_embedder
from .query import Breaker, QueryEncoder
from .sync import DenseIngest, DenseReport, ingest_lock, read_generation, searcher_at_commit
from .vectors import DENSE_DIR, load_current

if TYPE_CHECKING:  # indexes.rerank imports this package: imported where used
    from ..rerank import Observe as RerankObserve
    from ..rerank import RerankConfig

__all__ = ["HybridIndex", "HybridStore", "cache_for"]

CACHE_DIR = ".embedding-cache"


def cache_for(config: DenseConfig, store_root: Path, fingerprint: str) -> EmbeddingCache:
    """The embedding cache of `fingerprint`: under config.cache_dir, else
    `<store_root>/.embedding-cache/` (a dot folder is never taken for an index)."""
    folder = config.cache_dir if config.cache_dir is not None else Path(store_root) / CACHE_DIR
    return EmbeddingCache(EmbeddingCache.path_for(folder, fingerprint))


class HybridIndex(KnowledgeIndex):
    """An index configured hybrid (see module doc). Build through `IndexStore`.

    dense: the index's settings. store_root: the folder of all indexes (embedding cache).
    embedder: a provider to use instead of `make_embedder(dense)` (tests). warm: start loading
    the provider's model at once, in the background (a writer does not need it). observe: told
    of every search's outcome (`indexes.dense.hybrid.Observe`).
    search_may_wait: True: a search may wait up to `dense.query_timeout_ms` for its query
    embedding (a served model's HTTP round trip, the local model's turn on its thread pool, the
    model still loading), so a caller on an event loop runs it in a worker thread.
    """

    search_may_wait = True

    @property
    def model_ready(self) -> bool:
        """The query embedding's model has loaded and answered once (`QueryEncoder.warmed`)."""
        return self.dense.encoder.warmed

    def __init__(self, name: str, path: Path, index: tantivy.Index, *, dense: DenseConfig, store_root: Path,
                 embedder: Embedder | None = None, warm: bool = True, clock: Callable[[], float] = time.monotonic,
                 observe: Observe | None = None, **kwargs: Any) -> None:
        index.config_reader(reload_policy="manual")
        super().__init__(name, path, index, clock=clock, **kwargs)
        self.dense_config = dense
        self.store_root = Path(store_root)
        self.embedder = embedder if embedder is not None else make_embedder(dense)
        breaker = Breaker(dense.breaker_failures, dense.breaker_reset_seconds, clock)
        self.dense = DenseSearch(path, dense, QueryEncoder(self.embedder, dense.query_timeout_ms, breaker, clock),
                                 clock, observe)
        self.last_dense_report: DenseReport | None = None
        self._reload()  # the reader may predate a commit that landed since Index.open
        if warm:
            self.dense.encoder.warm()

    def _load(self) -> tuple[int | None, str | None]:
        """`KnowledgeIndex._load` where the dense state follows the reader: it is invalidated
        before the reload and re-paired with the generation loaded after it. The generation is
        exactly the reader's commit (manual reloads), None when it could not be pinned down
        (then the commit label is one read before the last reload, as `KnowledgeIndex`'s)."""
        self.dense.invalidate()
        generation, commit, _ = searcher_at_commit(self._index, self.path, reload=self.reload_reader)
        self.dense.reloaded(generation)
        return generation, commit

    def search(self, query: str, limit: int = 10, *, filter: SearchFilter | None = None,
               one_per_document: bool = True, summary_chars: int = 200, content_chars: int = 1500,
               where: MetaFilter | None = None, floor: float = 0.0, dials: Dials = NO_DIALS) -> list[Hit]:
        """Hybrid hits (fused BM25 + nearest neighbours, best first; Hit.score is the fused
        score), or exactly `KnowledgeIndex.search` whenever the dense side cannot answer
        within the per-query deadline. Same arguments (metadata conditions `where` included) and
        bounds as `KnowledgeIndex.search`; dials: a route's (`Dials`: the fusion's dense share and
        candidates, rerank on/off and its candidates, the rerank threshold's floor)."""
        return self.answer(query, limit, filter=filter, one_per_document=one_per_document,
                           summary_chars=summary_chars, content_chars=content_chars, where=where, floor=floor,
                           dials=dials)[0]

    def answer(self, query: str, limit: int, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> tuple[list[Hit], int | None]:
        """(`search`'s hits, the generation they may be reused for): the generation read before
        the search for a hybrid answer; None for a lexical fallback (vectors not published yet,
        deadline missed, breaker open...: the next search may well answer hybrid) and for an
        empty limit."""
        if limit <= 0:
            return [], None
        generation = self._generation  # before maybe_reload: never newer than the state searched
        self.maybe_reload()
        terms = analysed(query, self.synonyms)
        filters = self._scope_parts(filter, self._index.searcher(), where)

        def lexical_query(searcher: tantivy.Searcher) -> Query | None:
            return build_query(self._schema, terms, searcher, filter, self.boosts, filters=filters,
                               doc_freqs=self._doc_freqs)

        stage, degraded = (self.rerank if dials.rerank is not False else None), False

        def reorder(searcher: tantivy.Searcher, fused: list[tuple[Any, float]], address: dict[Any, Any],
                    make: Callable[..., Any]) -> tuple[list[tuple[Any, float]], Callable[..., Any]] | None:
            from ..rerank.chunks import rerank_fused

            nonlocal degraded
            assert stage is not None
            out = rerank_fused(stage, searcher, query, fused, address, make, dials.candidates)
            degraded = out is None
            return out

        hits = self.dense.search(self._index, lexical_query, query, terms, filters, limit,
                                 one_per_document=one_per_document, summary_chars=summary_chars,
                                 content_chars=content_chars, make_hit=make_hit, bounds=self.bounds,
                                 reorder=reorder if stage is not None else None,
                                 ideal=lambda searcher: ideal_score(terms, searcher, self.boosts, self._doc_freqs),
                                 question=lambda searcher: question_of(terms, searcher, self._schema, self._doc_freqs),
                                 floor=floor, dials=dials)
        if hits is not None:
            return hits, None if degraded else generation
        return super().search(query, limit, filter=filter, one_per_document=one_per_document,
                              summary_chars=summary_chars, content_chars=content_chars, where=where,
                              floor=floor, dials=dials), None

    def ingest(self, documents: Iterable[Document | IngestError | IngestWarning], *, delete_missing: bool = False,
               progress: bool = True, workers: int | None = None, replace: bool = False) -> IngestReport:
        """`KnowledgeIndex.ingest`, with the chunks of changed documents embedded before the
        commit and the vectors of the commit published after it (`indexes.dense.sync`).
        Raises IndexLockedError (another writer), EmbeddingError (provider failed after its
        retries: before the commit, nothing was written)."""
        return self._embedding(self.revisions, progress, lambda dense: super(HybridIndex, self).ingest(
            dense.stream(documents), delete_missing=delete_missing, progress=progress, workers=workers,
            replace=replace))

    def apply(self, changes: ChangeSet, *, progress: bool = False, workers: int | None = 1) -> IngestReport:
        """`KnowledgeIndex.apply` (a change set, all or nothing), its new chunks embedded before
        the commit and the vectors published after it, as `ingest`. Same errors."""

        def write(dense: DenseIngest) -> IngestReport:
            staged = tuple(d for d in dense.stream(changes.upserts) if isinstance(d, Document))
            return super(HybridIndex, self).apply(dataclasses.replace(changes, upserts=staged), progress=progress,
                                                  workers=workers)

        return self._embedding(lambda: {i: h.revision for i, h in self.heads(changes.ids).items()}, progress,
                               write)

    def _embedding(self, known: Callable[[], dict[str, str]], progress: bool,
                   write: Callable[[DenseIngest], IngestReport]) -> IngestReport:
        """Run `write` under the index's dense lock with a DenseIngest staging what it writes
        (known: doc_id → revision before it, read once the lock is held), then publish the
        vectors of the commit it made; with no commit, only when the vectors of the commit the
        index shows are missing (else `last_dense_report` reports them as kept)."""
        with ingest_lock(self.path, self.name):
            self.maybe_reload(force=True)  # what other writers committed before the lock was ours
            cache = cache_for(self.dense_config, self.store_root, self.embedder.fingerprint)
            dense = DenseIngest(self.path, self.dense_config, self.embedder, cache, chunk_chars=self.chunk_chars,
                                known={}, progress=progress)
            try:
                dense.known = dict(known())
                report = write(dense)
                generation = read_generation(self.path)
                current = load_current(self.path) if report.commit is None else None
                if current is not None and current.generation == generation \
                        and current.fingerprint == self.embedder.fingerprint:
                    # no commit, and the vectors of the one it shows are published: nothing to write
                    self.last_dense_report = DenseReport(generation=generation, chunks=len(current),
                                                         kept=len(current))
                else:  # a commit, or the vectors of the commit shown missing (a run killed before them)
                    self.last_dense_report = dense.publish(self._index)
            finally:
                dense.close()
                cache.close()
        self.maybe_reload(force=True)
        return report

    def cosine_line(self) -> CosineLine:
        """The cosine line searches judge on now (`indexes.dense.calibration`)."""
        return self.dense.line()

    def calibrate(self) -> CosineLine | None:
        """Measure the cosine line of the vectors of the commit the index shows and store it with
        them (`indexes.dense.calibration`: an index whose vectors predate measuring); this handle
        judges on it at once, a server from its next commit or restart. None when the index is
        too small to measure. Raises IndexLockedError while a writer holds the index, LookupError
        when the commit has no vectors of this model (run `kbgate index add` first), and the
        provider's EmbeddingError."""
        timeout = self.dense_config.timeout_seconds
        with ingest_lock(self.path, self.name):
            self.maybe_reload(force=True)
            generation, _, searcher = searcher_at_commit(self._index, self.path)
            current = load_current(self.path, view=False)
            if current is None or current.generation != generation \
                    or current.fingerprint != self.embedder.fingerprint:
                raise LookupError(f"index {self.name} has no vectors of {self.dense_config.model} for its latest "
                                  "commit: run kbgate index add first")
            keys = sorted(current.chunk_of)
            line = measure([current.chunk_of[k] for k in keys], lambda at: current.vectors([keys[i] for i in at]),
                           lambda ids: stored_texts(searcher, self._schema, ids),
                           lambda text: self.embedder.embed_query(text, timeout))
            if line is not None:
                write_line(current.folder, line)
        self.dense.reloaded(generation)  # this handle's state: the vectors again, with their line
        return line

    def close(self) -> None:
        """Stop the query encoder's threads and release the provider (and the rerank stage's)."""
        self.dense.encoder.close()
        super().close()


class HybridStore(IndexStore):
    """An `IndexStore` whose indexes configured hybrid open as `HybridIndex`; the others stay
    lexical `KnowledgeIndex`es. dense: index name → its settings (`[indexes.NAME.dense]`); a
    `DenseChoices` also makes hybrid, with its default settings, every index created here and
    every one already holding vectors, unless configured `dense = "none"`; observe: told of every
    hybrid search's outcome (`indexes.dense.hybrid.Observe`). rerank:
    index name → its rerank stage settings (`[indexes.NAME.rerank]`, `indexes.rerank`), attached
    to an index opened for serving (lexical or hybrid); observe_rerank: told of every rerank
    call's outcome (`indexes.rerank.Observe`). Other keyword arguments as `IndexStore` (clock, bounds)."""

    def __init__(self, root: Path, *, dense: Mapping[str, DenseConfig] | None = None,
                 observe: Observe | None = None, rerank: Mapping[str, RerankConfig] | None = None,
                 observe_rerank: RerankObserve | None = None, **kwargs: Any) -> None:
        super().__init__(root, **kwargs)
        self.dense: Mapping[str, DenseConfig] = dense or {}
        self._choices = dense if isinstance(dense, DenseChoices) else DenseChoices(self.dense)
        self._observe = observe
        self.rerank: Mapping[str, RerankConfig] = rerank or {}
        self._observe_rerank = observe_rerank

    def dense_for(self, name: str, *, creating: bool = False) -> DenseConfig | None:
        """The settings index `name` opens with here (`DenseChoices.for_index`), None: lexical."""
        return self._choices.for_index(name, self.folder(name), creating=creating)

    def create_or_open_for_write(self, name: str, *, chunk_chars: int = DEFAULT_MAX_CHARS) -> ServedIndex:
        """`IndexStore.create_or_open_for_write`; an index it creates gets the default dense
        settings (unless configured otherwise): its `dense/` folder is made first, so every
        later open, here or in a server, knows it is hybrid."""
        folder = self.folder(name)
        if name not in self.remote and not (folder / "meta.json").is_file() and \
                self.dense_for(name, creating=True) is not None:
            refuse_read_only(folder, name)  # IndexReadOnlyError naming the folder, not the mkdir's OSError
            (folder / DENSE_DIR).mkdir(parents=True, exist_ok=True)
        return super().create_or_open_for_write(name, chunk_chars=chunk_chars)

    def _make(self, name: str, folder: Path, index: tantivy.Index, chunk_chars: int, *,
              warm: bool = True, shadow: Shadow | None = None) -> KnowledgeIndex:
        dense = self.dense_for(name)
        if dense is None:
            ki = super()._make(name, folder, index, chunk_chars, warm=warm, shadow=shadow)
        else:
            serving = None if warm else self._open.get(name)  # a write handle borrows the served model
            lent = _Lent(serving.embedder) if isinstance(serving, HybridIndex) else None
            ki = HybridIndex(name, folder, index, dense=dense, store_root=self.root, clock=self._clock,
                             chunk_chars=chunk_chars, bounds=self.bounds, warm=warm, observe=self._observe,
                             embedder=lent, shadow=shadow)
        rerank = self.rerank.get(name)
        if rerank is not None and warm:  # a writer never reranks
            from ..rerank import RerankStage

            ki.rerank = RerankStage(name, rerank, clock=self._clock, observe=self._observe_rerank)
            ki.search_may_wait = True  # it may wait up to rerank.timeout_ms: off the event loop
        return ki


class _Lent:
    """The embedder of a served index lent to a write handle of the same index in the same
    process (the document API's writes): one model in memory, and closing the handle leaves
    the served index's provider open."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name, self.fingerprint = inner.name, inner.fingerprint

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_passages(texts)

    def embed_query(self, text: str, timeout: float) -> Vectors:
        return self.inner.embed_query(text, timeout)

    def warm(self) -> None:
        self.inner.warm()

    def close(self) -> None:
        """Nothing: the served index closes its provider."""
