"""`KnowledgeIndex`: one opened Tantivy index: search, read back, reload, and the single writer.

Rationale: docs/design-notes.md, "indexes/knowledge.py".
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import tantivy
from tantivy import Occur, Query

from . import documents, metadata, writer
from .browse import Browsing
from .filters import filter_query
from .hits import judge, search_hits
from .ingest.chunking import DEFAULT_MAX_CHARS
from .neighbours import with_neighbours
from .readonly import Shadow
from .relevance import Question
from .search import DEFAULT_BOOSTS, Boosts, DocFreqs, build_query, query_plan, question_of
from .stats import index_stats, meta_digest, meta_mtime, read_commit
from .synonyms import Synonyms, analysed
from .types import (
    DEFAULT_BOUNDS,
    NO_DIALS,
    ChangeSet,
    Dials,
    Document,
    DocumentHead,
    Hit,
    IndexStats,
    IngestError,
    IngestReport,
    IngestWarning,
    MetaFilter,
    SearchBounds,
    SearchFilter,
    StoredDocument,
)

if TYPE_CHECKING:
    from .rerank import RerankStage

__all__ = ["KnowledgeIndex", "RELOAD_CHECK_SECONDS"]

RELOAD_CHECK_SECONDS = 0.5
FILTER_CACHE_SIZE = 256  # distinct scope filters kept per index
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


class KnowledgeIndex(Browsing):
    """One opened index. Thread-safe for searches; `ingest` is for the one writer process.

    Build through `IndexStore.open` / `IndexStore.create_or_open_for_write`.
    search_may_wait: False: `search` only computes (no I/O wait beyond the mapped index), so a caller on an
    event loop may run it inline; True in a subclass that waits (`indexes.dense.HybridIndex`: a query
    embedding). model_ready: its query model answered (always, here; a hybrid index's once warmed).
    generation, commit: opstamp and `indexes.stats.commit_label` (/readyz) of the reader's last (re)load.
    incarnation: how many changed meta.json files this process's reader loaded (0 at open);
    with `generation` it names what the reader shows even when a folder rebuilt from scratch
    (or restored) reaches an opstamp seen before (the answer cache keys on both). Raised after
    the reload: a value read before a search is never newer than what the search shows.
    rerank: its optional rerank stage (`indexes.rerank`), attached by the store that opened it
    for serving. synonyms: the owner's synonyms, set by the gateway. None: neither. clean_at_ingest:
    its sidecar's `schema.CLEAN_AT_INGEST` is today's `schema.CLEAN_RULES`: served as stored,
    without `safe_text.clean_hit`. shadow: what Tantivy opened instead of a read-only folder
    (`indexes.readonly`), refreshed before each reload; None for a folder this process can write.
    """

    search_may_wait = False
    rerank: RerankStage | None = None
    synonyms: Synonyms | None = None
    clean_at_ingest = False

    def __init__(self, name: str, path: Path, index: tantivy.Index, *, clock: Callable[[], float] = time.monotonic,
                 boosts: Boosts = DEFAULT_BOOSTS, chunk_chars: int = DEFAULT_MAX_CHARS,
                 bounds: SearchBounds = DEFAULT_BOUNDS, shadow: Shadow | None = None) -> None:
        self.name = name
        self.shadow = shadow
        self.bounds, self.path, self._index, self._schema = bounds, path, index, index.schema
        self._filters: dict[SearchFilter | None, tuple[Query | None, Query | None]] = {}
        self._doc_freqs, self._clock, self.boosts, self.chunk_chars = DocFreqs(), clock, boosts, chunk_chars
        self._reload_lock = threading.Lock()
        self._last_check = clock()
        self._meta_mtime = meta_mtime(self.path)
        # Read before the reader loads: the label never names a commit newer than the reader shows.
        self._generation, self.commit = read_commit(path)
        self._meta_digest = meta_digest(path)
        self.incarnation = 0
        self._degraded = threading.local()  # this thread's last search fell back (`answer`)
        index.reload()

    @property
    def model_ready(self) -> bool:
        return True

    # ---- reading -------------------------------------------------------

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Reload the reader if meta.json changed; stats it at most every 0.5 s.

        Returns True when a reload happened. Cheap enough to call before every search.
        """
        now = self._clock()
        if not force and now - self._last_check < RELOAD_CHECK_SECONDS:
            return False
        with self._reload_lock:
            self._last_check = now
            mtime = meta_mtime(self.path)
            if mtime == self._meta_mtime and not force:
                return False
            self._meta_mtime = mtime
            digest = meta_digest(self.path)
            self._reload()
            if digest != self._meta_digest:  # counted after the reload: see `incarnation`
                self._meta_digest = digest
                self.incarnation += 1
            self._doc_freqs.clear()  # term statistics of the old commit
            return True

    def _reload(self) -> None:
        """Load the newest commit into the reader, then publish its labels (`generation` and
        `commit`, from `_load`) together. The one reload path of every index class: a subclass
        changes how the commit is loaded (`_load`), never what is published. Called under the
        reload lock (and once by a subclass's constructor)."""
        self._generation, self.commit = self._load()

    def _load(self) -> tuple[int | None, str | None]:
        """Reload the reader; returns (opstamp, `commit_label`) read *before* the reload, so the
        labels never name a commit newer than the searcher a caller takes next shows (the reader
        may be newer: a commit lands between the two; Tantivy never reloads on its own)."""
        generation, commit = read_commit(self.path)
        self.reload_reader()
        return generation, commit

    def reload_reader(self) -> None:
        """`tantivy.Index.reload`, through the shadow of a read-only folder (`Shadow.reload`)."""
        self.shadow.reload(self._index) if self.shadow is not None else self._index.reload()

    @property
    def generation(self) -> int | None:
        """The commit opstamp (grows with every commit) of the reader's last (re)load, None when meta.json could
        not be read then; an attribute read. A searcher taken after reading it shows that commit or a newer one;
        a new commit changes it at the next `maybe_reload` that sees it (at most RELOAD_CHECK_SECONDS later)."""
        return self._generation

    def search(self, query: str, limit: int = 10, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> list[Hit]:
        """Best chunks for `query`, highest BM25 score first, with their relevance (`indexes.relevance`).

        query: raw user text (analysed like indexed text). limit: max hits (<= 0 → []).
        filter: scope restriction; never changes scores. one_per_document: keep only the
        best chunk of each document (ids unique by construction either way); its content then
        continues with further matching chunks of that document.
        summary_chars / content_chars: bounds in characters of Hit.summary / Hit.content.
        where: metadata conditions narrowing `filter` (`indexes.metadata`), evaluated in the
        same Tantivy query, so the limit is filled from matching documents; never changes scores.
        floor: relevance 0..1 under which chunks are dropped before one-per-document shaping.
        dials: a route's (`Dials`: here rerank on/off, candidates and the rerank threshold's floor).
        The work done is bounded by `self.bounds` whatever the documents (`indexes.hits`).
        Raises ValueError for a metadata pattern Tantivy cannot compile
        (`indexes.metadata.condition_problem` tells beforehand)."""
        if limit <= 0:
            return []
        self.maybe_reload()
        terms = analysed(query, self.synonyms)  # the plan: computed once, for the query and its ideal score
        plan = query_plan(terms, searcher := self._index.searcher(), self.boosts, self._doc_freqs)
        q = build_query(self._schema, terms, searcher, filter, self.boosts,
                        filters=self._scope_parts(filter, searcher, where), doc_freqs=self._doc_freqs, plan=plan)
        if q is None:
            return []
        asked, bounds = question_of(terms, searcher, self._schema, self._doc_freqs), self.bounds
        if self.rerank is not None and dials.rerank is not False:  # the optional rerank stage, before the collapse
            from .rerank.chunks import reranked_hits  # indexes.rerank imports indexes.dense, which imports this

            hits, reranked = reranked_hits(  # its fallback to the lexical order: the answer is not reusable (`answer`)
                self.rerank, searcher, self._schema, q, query, terms, limit, floor=floor, asked=asked, bounds=bounds,
                one_per_document=one_per_document, summary_chars=summary_chars, content_chars=content_chars,
                judge=judge(asked), candidates=dials.candidates, floor_before=dials.rerank_threshold is not None)
            self._degraded.value = getattr(self._degraded, "value", False) or not reranked
            return hits
        return search_hits(searcher, self._schema, q, terms, limit, one_per_document=one_per_document,
                           summary_chars=summary_chars, content_chars=content_chars, bounds=self.bounds,
                           judge=judge(asked), floor=floor, asked=asked)

    def question(self, query: str) -> Question:  # what `search` judges hits by, on the commit it sees now
        return question_of(analysed(query, self.synonyms), self._index.searcher(), self._schema, self._doc_freqs)

    def answer(self, query: str, limit: int, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> tuple[list[Hit], int | None]:
        """(`search` with the same arguments, the generation those hits may be reused for): the label
        `generation` read before the search (the searcher shows that commit or a newer one, so an answer
        reused under it is never older than the label says). None: do not reuse the hits (the generation is
        unknown, or the answer was given in a degraded way: the rerank stage's fallback to the lexical order,
        `indexes.dense.HybridIndex`'s lexical fallback)."""
        generation = self._generation
        self._degraded.value = False
        hits = self.search(query, limit, filter=filter, one_per_document=one_per_document,
                           summary_chars=summary_chars, content_chars=content_chars, where=where, floor=floor,
                           dials=dials)
        return hits, None if self._degraded.value else generation

    def with_neighbours(self, hits: list[Hit], n: int, content_chars: int) -> list[Hit]:
        """`hits` with n neighbouring chunks on each side in their content (`indexes.neighbours`)."""
        return with_neighbours(self._index.searcher(), self._schema, hits, n, content_chars) if n > 0 else hits

    def _scope_parts(self, flt: SearchFilter | None, searcher: tantivy.Searcher,
                     where: MetaFilter | None) -> tuple[Query | None, Query | None]:
        """(must, must_not) of the scope filter `flt` narrowed by the metadata conditions
        `where` (one more constant-score must clause: it never widens the scope nor changes a
        score). Raises ValueError for a metadata pattern Tantivy cannot compile."""
        must, must_not = self._filter_parts(flt)
        narrowed = metadata.filter_query(self._schema, searcher, where) if where is not None else None
        if narrowed is not None:
            must = narrowed if must is None else Query.const_score_query(
                Query.boolean_query([(Occur.Must, must), (Occur.Must, narrowed)]), 0.0)
        return must, must_not

    def _filter_parts(self, flt: SearchFilter | None) -> tuple[Query | None, Query | None]:
        """`filter_query` for `flt`, cached per filter (a scope's filter repeats on every call)."""
        parts = self._filters.get(flt)
        if parts is None:
            if len(self._filters) >= FILTER_CACHE_SIZE:
                self._filters.clear()
            parts = self._filters[flt] = filter_query(self._schema, flt)
        return parts

    def get_document(self, doc_id: str, *, include_hidden: bool = False) -> StoredDocument | None:
        """The whole document reassembled from its chunks in order, or None.

        Hidden documents (qa_visible=False) read as None unless include_hidden.
        Text: each section heading then its body (overlaps removed), joined by newlines.
        """
        self.maybe_reload()
        return documents.read_document(self._index.searcher(), self._schema, doc_id,
                                       include_hidden=include_hidden)

    def doc_id_at(self, path: str, datasets: tuple[str, ...] | None = None) -> str | None:
        """The id of a document whose tree `path` is exactly `path` (raw term) and, unless
        datasets is None, whose dataset is one of `datasets`; or None. Visibility is not
        checked here; callers read the document and check it."""
        self.maybe_reload()
        return documents.doc_id_at(self._index.searcher(), self._schema, path, datasets)

    def reader(self) -> tuple[tantivy.Searcher, tantivy.Schema]:
        """(a searcher of the current commit, the schema), after `maybe_reload` (`indexes.browse`)."""
        self.maybe_reload()
        return self._index.searcher(), self._schema

    def revisions(self) -> dict[str, str]:
        """doc_id → revision for every document in the index (read from chunk 0)."""
        return documents.revisions(self._index.searcher(), self._schema)

    def heads(self, ids: Iterable[str]) -> dict[str, DocumentHead]:
        """doc_id → DocumentHead of each of `ids` the index holds (after `maybe_reload`)."""
        self.maybe_reload()
        return documents.heads(self._index.searcher(), self._schema, ids)

    def stats(self) -> IndexStats:
        """Documents, chunks, generation (commit opstamp), last commit time, size on disk."""
        self.maybe_reload()
        return index_stats(self.name, self.path, self._index.searcher(), self._schema)

    # ---- writing -------------------------------------------------------

    def ingest(self, documents: Iterable[Document | IngestError | IngestWarning], *, delete_missing: bool = False,
               progress: bool = True, workers: int | None = None, replace: bool = False) -> IngestReport:
        """Upsert documents by id in one commit; returns what changed.

        documents: Documents, and a reader's IngestErrors / IngestWarnings (the report's errors /
        warnings). An unchanged revision is skipped; a changed one replaces all chunks of that
        id. An id repeated in one run: the last document wins, each override is a warning
        (`indexes.writer.ingest`); one whose id another dataset holds is refused, and so is one
        the index holds from another source file unless `replace`.
        delete_missing: delete indexed ids of this run's datasets not seen in this run; not run
        (a warning says so) after an input error or when no document was read. A run that
        changes nothing makes no commit (`report.commit` None, the generation stays).
        progress: tqdm bar on stderr, only when stderr is a TTY.
        workers: processes for the analysis (default: one per CPU); used only once more than
        analyser.PARALLEL_MIN_DOCS documents need indexing, since each worker first loads rjieba.
        Raises IndexLockedError when another writer holds the index."""
        report = writer.ingest_index(self._index, self._schema, self.name, str(self.path), documents,
                                     chunk_chars=self.chunk_chars, delete_missing=delete_missing, replace=replace,
                                     progress=progress, workers=workers)
        self.maybe_reload(force=True)
        return report

    def apply(self, changes: ChangeSet, *, progress: bool = False, workers: int | None = 1) -> IngestReport:
        """A change set in one commit, all or nothing (`writer.apply_index`; `indexes.changes`
        waits for the writer), then the reader reloaded. progress, workers: as `ingest`'s.
        Raises IndexLockedError (another writer)."""
        report = writer.apply_index(self._index, self._schema, self.name, str(self.path), changes,
                                    chunk_chars=self.chunk_chars, progress=progress, workers=workers)
        self.maybe_reload(force=True)
        return report

    def close(self) -> None:
        """Release what this index holds beyond its Tantivy reader: its rerank stage's threads
        when it has one (`indexes.dense.HybridIndex` also stops its query encoder)."""
        if self.rerank is not None:
            self.rerank.close()
        if self.shadow is not None:
            self.shadow.close()
