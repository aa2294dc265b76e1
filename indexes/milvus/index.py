"""`MilvusIndex`: an index served by a Milvus collection, behind `indexes.types.ServedIndex`.

Rationale: docs/design-notes.md, "indexes/milvus/index.py".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..analysis import QueryTerms
from ..errors import IndexNotFoundError
from ..hits import chunk_fold, make_hit
from ..relevance import Question, content_units, question
from ..search import COMMON_TERM_MIN_CHUNKS, COMMON_TERM_RATIO, DEFAULT_BOOSTS
from ..synonyms import Synonyms, analysed
from ..types import (
    DEFAULT_BOUNDS,
    NO_DIALS,
    ChangeSet,
    ChunkView,
    Dials,
    Document,
    DocumentHead,
    DocumentRow,
    Hit,
    IndexStats,
    IngestError,
    IngestReport,
    IngestWarning,
    MetaFilter,
    MilvusConfig,
    Scores,
    SearchBounds,
    SearchFilter,
    StoredDocument,
)
from .client import STORED, Collection
from .rows import Row
from .scope import allowed, expression, quote
from .search import candidates, grouped
from .terms import counts as term_counts
from .terms import profile as read_profile
from .where import admitted
from .writes import apply as apply_changes
from .writes import ingest as ingest_documents

__all__ = ["MilvusIndex"]

RELOAD_CHECK_SECONDS = 0.5
FETCH_PER_RESULT = 8  # chunks asked of each field search per result wanted
MAX_ROWS = 16_384


class MilvusIndex:
    """Index `name` in the collection `config.collection` (module doc). path: the local folder of
    the writer's records and lock (`indexes.changes`). Thread-safe for searches; one writer."""

    search_may_wait = True  # every search waits on Milvus: the core runs it in a worker thread
    rerank: Any = None
    synonyms: Synonyms | None = None
    clean_at_ingest = False

    def __init__(self, name: str, config: MilvusConfig, path: Path, *, bounds: SearchBounds = DEFAULT_BOUNDS,
                 clock: Callable[[], float] = time.monotonic, chunk_chars: int = 600) -> None:
        self.name, self.config, self.path, self.bounds, self.chunk_chars = name, config, path, bounds, chunk_chars
        self.coll = Collection(name, config)
        self._clock = clock
        self._lock = threading.Lock()
        self._last_check = -1e18
        self._generation: int | None = None
        self.commit: str | None = None
        self.incarnation = 0
        self._freqs: dict[str, int] = {}
        self._profile: Any = None

    # ---- labels ---------------------------------------------------------

    @property
    def model_ready(self) -> bool:
        return True

    @property
    def generation(self) -> int | None:
        return self._generation

    def check(self) -> None:
        """Is the collection there and answering? Raises IndexUnavailableError, IndexNotFoundError."""
        if not self.coll.exists():
            raise IndexNotFoundError(self.name, f"Milvus collection {self.config.collection!r}")

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Read the collection's generation at most every RELOAD_CHECK_SECONDS (always with force);
        True when it moved (the kept statistics are dropped). Raises IndexUnavailableError."""
        now = self._clock()
        if not force and now - self._last_check < RELOAD_CHECK_SECONDS and self._generation is not None:
            return False
        with self._lock:
            self._last_check = now
            gen = self.coll.generation()
            if gen == self._generation:
                return False
            if self._generation is not None and gen < self._generation:
                self.incarnation += 1  # a collection made again: the generation starts over
            self._generation, self.commit = gen, f"{gen}-milvus"
            self._freqs, self._profile = {}, None
            return True

    # ---- searching ------------------------------------------------------

    def question(self, query: str) -> Question:
        return self._question(analysed(query, self.synonyms))

    def _question(self, terms: QueryTerms) -> Question:
        units = content_units(terms.text)
        wanted = [f"l:{u}" if u.isascii() else f"w:{u}" for u in units] + [
            f"l:{s}" if s.isascii() else f"w:{s}" for _, s in terms.expansions]
        missing = [k for k in wanted if k not in self._freqs]
        if missing:
            got = term_counts(self.coll, missing)
            self._freqs.update({k: got.get(k, 0) for k in missing})
        if self._profile is None:
            self._profile = read_profile(self.coll)

        def documents_with(term: str, fields: tuple[str, ...]) -> int:
            key = f"l:{term}" if fields == ("body_latin",) else f"w:{term}"
            if key not in self._freqs:
                self._freqs[key] = term_counts(self.coll, [key]).get(key, 0)
            return self._freqs[key]

        return question(terms.text, documents_with, self._profile.expected, terms.expansions)

    def _common(self, terms: QueryTerms) -> frozenset[str]:
        """The question's words and Latin words held by more than COMMON_TERM_RATIO of the
        documents (and more than COMMON_TERM_MIN_CHUNKS of them): `indexes.search`'s rule, counted
        in documents (what the writer keeps) rather than chunks."""
        keys = {t: f"w:{t}" for t in terms.words} | {t: f"l:{t}" for t in terms.latin}
        missing = [k for k in keys.values() if k not in self._freqs]
        if missing:
            got = term_counts(self.coll, missing)
            self._freqs.update({k: got.get(k, 0) for k in missing})
        documents = self._profile.documents if self._profile is not None else 0
        cutoff = max(COMMON_TERM_RATIO * documents, COMMON_TERM_MIN_CHUNKS)
        return frozenset(t for t, k in keys.items() if self._freqs[k] > cutoff)

    def search(self, query: str, limit: int = 10, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> list[Hit]:
        """`indexes.store.KnowledgeIndex.search`'s contract, on Milvus (module doc). Raises
        IndexUnavailableError; ValueError for a metadata pattern Tantivy cannot compile. Metadata
        conditions narrow the candidates (`indexes.milvus.where`)."""
        if limit <= 0:
            return []
        with self.coll.budget():
            return self._search(query, limit, filter, one_per_document, summary_chars, content_chars, where, floor)

    def _search(self, query: str, limit: int, filter: SearchFilter | None, one_per_document: bool,
                summary_chars: int, content_chars: int, where: MetaFilter | None, floor: float) -> list[Hit]:
        self.maybe_reload()
        terms = analysed(query, self.synonyms)
        fetch = min(max(limit * FETCH_PER_RESULT, 50), self.bounds.max_chunks_per_query)
        asked = self._question(terms)
        scores = candidates(self.coll, terms, expression(filter), fetch, DEFAULT_BOOSTS, self._common(terms))
        if not scores:
            return []
        folded: dict[str, str] = {}
        keep_more = self.bounds.max_chunks_per_document - 1 if one_per_document else 0
        docs = grouped(scores, keep_more) if one_per_document else [
            c for key, s in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))
            for c in grouped({key: s}, 0)]
        hits: list[Hit] = []
        for start in range(0, len(docs), limit):
            page = docs[start:start + limit]
            rows = self._rows([i for d in page for i in d.ids])
            if where is not None and where.conditions:  # the same rules as Tantivy's, on the candidates
                kept = admitted(rows.values(), where)
                rows = {i: r for i, r in rows.items() if i in kept}
            for d in page:
                best = rows.get(d.ids[0])
                if best is None or not allowed(filter, best.get_first("path") or "", d.doc_id):
                    continue
                rel = asked.about(chunk_fold(best, folded))  # type: ignore[arg-type]
                if rel < floor:
                    continue
                more = [r for i in d.ids[1:] if (r := rows.get(i)) is not None
                        and asked.about(chunk_fold(r, folded)) >= floor]  # type: ignore[arg-type]
                hits.append(make_hit(d.score, best, terms, summary_chars, content_chars, more,  # type: ignore[arg-type]
                                     scores=Scores(bm25=d.score), relevance=rel, asked=asked))
                if len(hits) >= limit:
                    return hits
        return hits

    def answer(self, query: str, limit: int, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = NO_DIALS) -> tuple[list[Hit], int | None]:
        """(`search`, the generation read before it: the answer may be reused under it)."""
        with self.coll.budget():  # one timeout_seconds for the whole answer
            self.maybe_reload()
            generation = self._generation
            return self.search(query, limit, filter=filter, one_per_document=one_per_document,
                               summary_chars=summary_chars, content_chars=content_chars, where=where, floor=floor,
                               dials=dials), generation

    def with_neighbours(self, hits: list[Hit], n: int, content_chars: int) -> list[Hit]:
        """`hits` with n neighbouring chunks on each side in their content (`indexes.neighbours`)."""
        from ..neighbours import widened

        def window(h: Hit) -> dict[int, Row]:
            rows = self._rows([f"{h.doc_id}#{c}" for c in range(max(h.chunk - n, 0), h.chunk + n + 1)])
            return {int(r.get_first("chunk") or 0): r for r in rows.values()}

        return widened(hits, n, content_chars, window)

    # ---- reading --------------------------------------------------------

    def _rows(self, ids: list[str]) -> dict[str, Row]:
        if not ids:
            return {}
        got = self.coll.read("get", self.coll.chunks, ids=ids, output_fields=list(STORED))
        return {str(r["id"]): Row(r) for r in got}

    def _query(self, expr: str, fields: Iterable[str] = STORED) -> list[Row]:
        got = self.coll.read("query", self.coll.chunks, filter=expr, output_fields=list(fields), limit=MAX_ROWS)
        return [Row(r) for r in got]

    def chunks(self, doc_id: str) -> list[Row]:
        """Every chunk row of `doc_id`, in chunk order (however many)."""
        rows = self.coll.scan(self.coll.chunks, f"doc_id == {quote(doc_id)}", list(STORED))
        return sorted((Row(r) for r in rows), key=lambda r: int(r.get_first("chunk") or 0))

    def get_document(self, doc_id: str, *, include_hidden: bool = False) -> StoredDocument | None:
        from ..documents import document_of

        self.maybe_reload()
        return document_of(self.chunks(doc_id), doc_id, include_hidden=include_hidden)

    def doc_id_at(self, path: str, datasets: tuple[str, ...] | None = None) -> str | None:
        expr = f"chunk == 0 and path == {quote(path)}"
        if datasets is not None:
            expr += f" and dataset in [{', '.join(map(quote, datasets))}]" if datasets else " and chunk < 0"
        got = self.coll.read("query", self.coll.chunks, filter=expr, output_fields=["doc_id"], limit=1)
        return str(got[0]["doc_id"]) if got else None

    def _firsts(self, fields: Iterable[str]) -> list[Row]:
        """The first chunk's `fields` of every document (however many)."""
        return [Row(r) for r in self.coll.scan(self.coll.chunks, "chunk == 0", list(fields))]

    def revisions(self) -> dict[str, str]:
        return {str(r.get_first("doc_id")): str(r.get_first("revision") or "")
                for r in self._firsts(("doc_id", "revision"))}

    def heads(self, ids: Iterable[str]) -> dict[str, DocumentHead]:
        wanted = list(dict.fromkeys(ids))
        out: dict[str, DocumentHead] = {}
        for k in range(0, len(wanted), 500):
            expr = f"chunk == 0 and doc_id in [{', '.join(map(quote, wanted[k:k + 500]))}]"
            for r in self._query(expr, ("doc_id", "revision", "dataset", "path", "source")):
                d = str(r.get_first("doc_id"))
                out[d] = DocumentHead(d, str(r.get_first("revision") or ""), str(r.get_first("dataset") or ""),
                                      str(r.get_first("path") or ""), str(r.get_first("source") or ""))
        return out

    def stats(self) -> IndexStats:
        self.maybe_reload(force=True)
        docs = self.coll.read("query", self.coll.chunks, filter="chunk == 0", output_fields=["count(*)"])
        chunks = self.coll.read("query", self.coll.chunks, filter="chunk >= 0", output_fields=["count(*)"])
        return IndexStats(self.name, int(docs[0]["count(*)"]), int(chunks[0]["count(*)"]), self._generation or 0,
                          None, 0, self.commit)

    # ---- the owner's view -----------------------------------------------

    def document_rows(self) -> list[DocumentRow]:
        return sorted((DocumentRow(str(r.get_first("doc_id")), str(r.get_first("title") or ""),
                                   str(r.get_first("path") or ""), str(r.get_first("dataset") or ""),
                                   str(r.get_first("revision") or ""), r.get_first("qa_visible") == 1,
                                   int(r.get_first("n_chunks") or 0))
                       for r in self._firsts(("doc_id", "title", "path", "dataset", "revision", "qa_visible",
                                              "n_chunks"))), key=lambda d: d.doc_id)

    def hidden_count(self) -> int:
        got = self.coll.read("query", self.coll.chunks, filter="chunk == 0 and qa_visible == false",
                             output_fields=["count(*)"])
        return int(got[0]["count(*)"])

    def chunk_views(self, doc_id: str) -> list[ChunkView]:
        from ..browse import views_of

        return views_of(self.chunks(doc_id))

    def as_document(self, doc_id: str, *, qa_visible: bool | None = None) -> Document | None:
        from ..browse import document_from

        return document_from(self.chunks(doc_id), doc_id, qa_visible=qa_visible)

    def holders(self) -> dict[str, tuple[str, str]]:
        return {str(r.get_first("doc_id")): (str(r.get_first("dataset") or ""), str(r.get_first("source") or ""))
                for r in self._firsts(("doc_id", "dataset", "source"))}

    # ---- writing (`indexes.milvus.writes`) ------------------------------

    def ingest(self, documents: Iterable[Document | IngestError | IngestWarning], *, delete_missing: bool = False,
               progress: bool = True, workers: int | None = None, replace: bool = False) -> IngestReport:
        report = ingest_documents(self, documents, delete_missing=delete_missing, replace=replace)
        self.maybe_reload(force=True)
        return report

    def apply(self, changes: ChangeSet, *, progress: bool = False, workers: int | None = 1) -> IngestReport:
        report = apply_changes(self, changes)
        self.maybe_reload(force=True)
        return report

    def close(self) -> None:
        self.coll.close()
