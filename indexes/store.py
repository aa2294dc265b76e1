"""Index storage: open, search, read back, reload, and the single writer.

`IndexStore(root)` holds one folder per index (`root/<name>/`, a Tantivy index
plus the schema sidecar). The server only reads (`open`, cached); the indexer
writes (`create_or_open_for_write` + `KnowledgeIndex.ingest`). Tantivy commits
are atomic for readers; `maybe_reload` lets a long-running reader pick up a
new commit without reopening. One writer per index: a second one raises
`IndexLockedError`.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tantivy
from tantivy import Query

from .analysis import index_tokens, normalize, normalize_positions, query_terms
from .errors import IndexLockedError, IndexNotFoundError, IndexStoreError
from .ingest.chunking import DEFAULT_MAX_CHARS, chunk
from .schema import build_schema, check_sidecar, register_analyzers, write_sidecar
from .search import DEFAULT_BOOSTS, Boosts, bounded, build_query, excerpt, filter_query
from .types import (
    Chunk,
    CoverImage,
    Document,
    Hit,
    IndexStats,
    IngestError,
    IngestReport,
    SearchFilter,
    StoredDocument,
)

if TYPE_CHECKING:
    from .dense.config import DenseConfig

__all__ = ["IndexStore", "KnowledgeIndex", "document_revision"]

MIB = 1024 * 1024
WRITER_HEAP_BYTES = 256 * MIB
RELOAD_CHECK_SECONDS = 0.5
INGEST_BATCH_DOCS = 256  # documents analysed per batch
PARALLEL_MIN_DOCS = 2000  # below this, worker start-up (rjieba load) costs more than it saves
FILTER_CACHE_SIZE = 256  # distinct scope filters kept per index
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def document_revision(doc: Document) -> str:
    """SHA-256 hex over everything indexed for `doc` (title, sections, metadata).

    Any change to text or metadata (e.g. qa_visible) changes the revision, so an
    unchanged revision means the indexed chunks can be kept as they are.
    """
    payload = {
        "title": doc.title,
        "sections": [[s.heading, s.text] for s in doc.sections],
        "url": doc.url,
        "summary": doc.summary,
        "publish_time": doc.publish_time,
        "cover": None if doc.cover_image is None else [
            doc.cover_image.url, doc.cover_image.height, doc.cover_image.width],
        "path": doc.path,
        "dataset": doc.dataset,
        "qa_visible": doc.qa_visible,
    }
    raw = json.dumps(payload, ensure_ascii=False, sort_keys=True).encode("utf-8")
    return hashlib.sha256(raw).hexdigest()


def _chunk_text(doc: tantivy.Document) -> str:
    """A chunk's heading line (when it has one) and its text."""
    text = _first(doc, "text") or ""
    heading = doc.get_first("heading") or ""
    return f"{heading}\n{text}" if heading else text


def _first(doc: tantivy.Document, name: str) -> Any:
    value = doc.get_first(name)
    return value.decode("utf-8") if isinstance(value, bytes) else value


def chunk_fields(doc: Document, revision: str, chunk_chars: int) -> list[dict[str, Any]]:
    """The stored and analysed fields of each chunk of `doc`, as plain dicts.

    Pure and picklable, so ingest can run it in worker processes: this analysis (rjieba,
    bigrams, folding) is where indexing spends its time.
    """
    chunks: list[Chunk] = chunk(doc, max_chars=chunk_chars)
    title_words, title_grams = index_tokens(normalize(doc.title))
    cover = doc.cover_image
    common: dict[str, Any] = {
        "doc_id": doc.id,
        "title": doc.title,
        "n_chunks": len(chunks),
        "revision": revision,
        "path": doc.path,
        "dataset": doc.dataset,
        "qa_visible": 1 if doc.qa_visible else 0,
        "title_words": title_words,
        "title_bigrams": title_grams,
    }
    if doc.url:
        common["url"] = doc.url
    if doc.summary:
        common["summary"] = [doc.summary.encode("utf-8")]
    if doc.publish_time is not None:
        common["publish_time"] = doc.publish_time
    if cover is not None:
        common["cover_url"] = cover.url
        if cover.height is not None:
            common["cover_height"] = cover.height
        if cover.width is not None:
            common["cover_width"] = cover.width
    out: list[dict[str, Any]] = []
    for c in chunks:
        fold = normalize_positions(c.text)
        keep_fold = fold != c.text and len(fold) == len(c.text)
        extra = {"text_fold": [fold.encode("utf-8")]} if keep_fold else {}
        body_words, body_grams = index_tokens(
            normalize(f"{c.heading}\n{c.text}" if c.heading else c.text))
        out.append(dict(
            **common,
            chunk_id=f"{doc.id}#{c.n}",
            chunk=c.n,
            overlap=c.overlap,
            section=c.section,
            heading=c.heading,
            text=[c.text.encode("utf-8")],
            body_words=body_words,
            body_bigrams=body_grams,
            **extra,
        ))
    return out


class _Analyser:
    """Turns batches of (Document, revision) into tantivy documents added to a writer.

    In this process while few documents have been seen; from PARALLEL_MIN_DOCS on, in a
    pool of `workers` spawned processes (spawn, not fork: the writer runs threads).
    """

    def __init__(self, chunk_chars: int, workers: int | None) -> None:
        self.chunk_chars = chunk_chars
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        self.seen = 0
        self.pool: ProcessPoolExecutor | None = None

    def add(self, writer: tantivy.IndexWriter, batch: list[tuple[Document, str]]) -> int:
        """Analyse `batch`, add its chunks to `writer`; returns the number of chunks added."""
        if not batch:
            return 0
        self.seen += len(batch)
        if self.pool is None and self.workers > 1 and self.seen > PARALLEL_MIN_DOCS:
            self.pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        docs = [d for d, _ in batch]
        revisions = [r for _, r in batch]
        sizes = [self.chunk_chars] * len(batch)
        results: Iterable[list[dict[str, Any]]] = []
        if self.pool is not None:
            try:
                results = list(self.pool.map(chunk_fields, docs, revisions, sizes, chunksize=16))
            except BrokenProcessPool:
                # e.g. a script without an `if __name__ == "__main__":` guard, re-run by spawn
                print("kbgate: analysis worker processes failed; indexing in this process",
                      file=sys.stderr)
                self.close()
                self.workers = 1
        if self.pool is None:
            results = map(chunk_fields, docs, revisions, sizes)
        added = 0
        for fields in results:
            for f in fields:
                writer.add_document(tantivy.Document(**f))
                added += 1
        return added

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None


class KnowledgeIndex:
    """One opened index. Thread-safe for searches; `ingest` is for the one writer process.

    Build through `IndexStore.open` / `IndexStore.create_or_open_for_write`.
    """

    def __init__(
        self,
        name: str,
        path: Path,
        index: tantivy.Index,
        *,
        clock: Callable[[], float] = time.monotonic,
        boosts: Boosts = DEFAULT_BOOSTS,
        chunk_chars: int = DEFAULT_MAX_CHARS,
    ) -> None:
        self.name = name
        self.path = path
        self._index = index
        self._schema = index.schema
        self._filters: dict[SearchFilter | None, tuple[Query | None, Query | None]] = {}
        self._clock = clock
        self.boosts = boosts
        self.chunk_chars = chunk_chars
        self._reload_lock = threading.Lock()
        self._last_check = clock()
        self._meta_mtime = self._stat_meta()

    # ---- reading -------------------------------------------------------

    def _stat_meta(self) -> int:
        try:
            return (self.path / "meta.json").stat().st_mtime_ns
        except OSError:
            return 0

    def maybe_reload(self, *, force: bool = False) -> bool:
        """Reload the reader if meta.json changed; stats it at most every 0.5 s.

        Returns True when a reload happened. Cheap enough to call before every search.
        """
        now = self._clock()
        if not force and now - self._last_check < RELOAD_CHECK_SECONDS:
            return False
        with self._reload_lock:
            self._last_check = now
            mtime = self._stat_meta()
            if mtime == self._meta_mtime and not force:
                return False
            self._meta_mtime = mtime
            self._index.reload()
            return True

    def search(
        self,
        query: str,
        limit: int = 10,
        *,
        filter: SearchFilter | None = None,
        one_per_document: bool = True,
        summary_chars: int = 200,
        content_chars: int = 1500,
    ) -> list[Hit]:
        """Best chunks for `query`, highest BM25 score first.

        query: raw user text (analysed like indexed text). limit: max hits (<= 0 → []).
        filter: scope restriction; never changes scores. one_per_document: keep only the
        best chunk of each document (ids unique by construction either way).
        summary_chars / content_chars: bounds in characters of Hit.summary / Hit.content.
        """
        if limit <= 0:
            return []
        self.maybe_reload()
        terms = query_terms(query)
        q = build_query(self._schema, terms, filter, self.boosts, filters=self._filter_parts(filter))
        if q is None:
            return []
        searcher = self._index.searcher()
        fetch = limit * 4 if one_per_document else limit
        while True:
            found = searcher.search(q, fetch).hits
            picked: list[tuple[float, tantivy.Document]] = []
            # Other matching chunks of a picked document, best first: they become the
            # "context" of its KnowledgeContent when one result per document is kept.
            more: dict[str, list[tantivy.Document]] = {}
            for score, address in found:
                doc = searcher.doc(address)
                doc_id = doc.get_first("doc_id")
                if one_per_document:
                    if doc_id in more:
                        more[doc_id].append(doc)
                        continue
                    more[doc_id] = []
                if len(picked) < limit:
                    picked.append((score, doc))
            if len(picked) == limit or len(found) < fetch or fetch >= 10_000:
                break
            fetch *= 4
        return [
            self._hit(score, doc, terms, summary_chars, content_chars,
                      more.get(doc.get_first("doc_id"), ()))
            for score, doc in picked
        ]

    def _filter_parts(self, flt: SearchFilter | None) -> tuple[Query | None, Query | None]:
        """`filter_query` for `flt`, cached per filter (a scope's filter repeats on every call)."""
        parts = self._filters.get(flt)
        if parts is None:
            if len(self._filters) >= FILTER_CACHE_SIZE:
                self._filters.clear()
            parts = self._filters[flt] = filter_query(self._schema, flt)
        return parts

    def _hit(self, score: float, doc: tantivy.Document, terms: Any, summary_chars: int,
             content_chars: int, context: Sequence[tantivy.Document] = ()) -> Hit:
        """A Hit from the best chunk `doc`; `context`: further matching chunks of the same
        document (best first), appended to the content while `content_chars` allows."""
        doc_id = doc.get_first("doc_id")
        n = doc.get_first("chunk")
        text = _first(doc, "text") or ""
        content = _chunk_text(doc)
        for extra in context:  # best first, until the bound (the last one may be cut)
            if len(content) + 2 >= content_chars:
                break
            content = f"{content}\n\n{_chunk_text(extra)}"
        cover_url = doc.get_first("cover_url")
        return Hit(
            id=doc_id if doc.get_first("n_chunks") == 1 else f"{doc_id}#{n}",
            doc_id=doc_id,
            chunk=n,
            title=doc.get_first("title") or "",
            # No text_fold stored: the text is its own fold (or folding changed its length).
            summary=excerpt(text, terms, summary_chars, folded=_first(doc, "text_fold") or text),
            content=bounded(content, content_chars),
            score=float(score),
            url=doc.get_first("url") or None,
            publish_time=doc.get_first("publish_time"),
            cover_image=None if not cover_url else CoverImage(
                cover_url, doc.get_first("cover_height"), doc.get_first("cover_width")),
            path=doc.get_first("path") or "",
            dataset=doc.get_first("dataset") or "",
            revision=doc.get_first("revision") or "",
        )

    def _chunks_of(self, doc_id: str) -> list[tantivy.Document]:
        searcher = self._index.searcher()
        q = Query.term_query(self._schema, "doc_id", doc_id)
        count = searcher.search(q, 1, count=True).count or 0
        if not count:
            return []
        docs = [searcher.doc(a) for _, a in searcher.search(q, count).hits]
        return sorted(docs, key=lambda d: d.get_first("chunk"))

    def get_document(self, doc_id: str, *, include_hidden: bool = False) -> StoredDocument | None:
        """The whole document reassembled from its chunks in order, or None.

        Hidden documents (qa_visible=False) read as None unless include_hidden.
        Text: each section heading then its body (overlaps removed), joined by newlines.
        """
        self.maybe_reload()
        chunks = self._chunks_of(doc_id)
        if not chunks:
            return None
        first = chunks[0]
        visible = first.get_first("qa_visible") == 1
        if not visible and not include_hidden:
            return None
        parts: list[str] = []
        section = None
        for c in chunks:
            body = (_first(c, "text") or "")[c.get_first("overlap") or 0:]
            if c.get_first("section") != section:
                section = c.get_first("section")
                if c.get_first("heading"):
                    parts.append(c.get_first("heading"))
                parts.append(body)
            else:
                parts[-1] += body
        return StoredDocument(
            doc_id=doc_id,
            title=first.get_first("title") or "",
            text="\n".join(p for p in parts if p),
            revision=first.get_first("revision") or "",
            url=first.get_first("url") or None,
            summary=_first(first, "summary") or None,
            publish_time=first.get_first("publish_time"),
            path=first.get_first("path") or "",
            dataset=first.get_first("dataset") or "",
            qa_visible=visible,
        )

    def doc_id_at(self, path: str) -> str | None:
        """The id of the document whose tree `path` is exactly `path` (raw term), or None.

        Visibility is not checked here; callers read the document and check it.
        """
        self.maybe_reload()
        searcher = self._index.searcher()
        q = Query.boolean_query([(tantivy.Occur.Must, Query.term_query(self._schema, "path", path)),
                                 (tantivy.Occur.Must, Query.term_query(self._schema, "chunk", 0))])
        hits = searcher.search(q, 1).hits
        if not hits:
            return None
        doc_id: str = searcher.doc(hits[0][1]).get_first("doc_id")
        return doc_id

    def revisions(self) -> dict[str, str]:
        """doc_id → revision for every document in the index (read from chunk 0)."""
        searcher = self._index.searcher()
        q = Query.term_query(self._schema, "chunk", 0)
        count = searcher.search(q, 1, count=True).count or 0
        if not count:
            return {}
        out: dict[str, str] = {}
        for _, address in searcher.search(q, count).hits:
            d = searcher.doc(address)
            out[d.get_first("doc_id")] = d.get_first("revision")
        return out

    def stats(self) -> IndexStats:
        """Documents, chunks, generation (commit opstamp), last commit time, size on disk."""
        self.maybe_reload()
        searcher = self._index.searcher()
        docs = searcher.search(Query.term_query(self._schema, "chunk", 0), 1, count=True).count
        try:
            meta_path = self.path / "meta.json"
            opstamp = int(json.loads(meta_path.read_text(encoding="utf-8")).get("opstamp", 0))
            last = meta_path.stat().st_mtime
        except (OSError, ValueError):
            opstamp, last = 0, None
        size = sum(p.stat().st_size for p in self.path.iterdir() if p.is_file())
        return IndexStats(self.name, int(docs or 0), int(searcher.num_docs), opstamp, last, size)

    # ---- writing -------------------------------------------------------

    def _writer(self) -> tantivy.IndexWriter:
        try:
            return self._index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=0)
        except ValueError as exc:
            if "lock" in str(exc).lower():
                raise IndexLockedError(self.name, str(self.path)) from None
            raise

    def ingest(
        self,
        documents: Iterable[Document | IngestError],
        *,
        delete_missing: bool = False,
        progress: bool = True,
        workers: int | None = None,
    ) -> IngestReport:
        """Upsert documents by id in one commit; returns what changed.

        documents: Documents (and IngestErrors from a reader, recorded in the report).
        An unchanged revision is skipped; a changed one replaces all chunks of that id.
        delete_missing: delete indexed ids not seen in this run; skipped (and reported
        as an error) when any input error occurred, so a broken file never empties the
        index. progress: tqdm bar on stderr, only when stderr is a TTY.
        workers: processes for the analysis (default: one per CPU); used only once more than
        PARALLEL_MIN_DOCS documents need indexing, since each worker first loads rjieba.
        Raises IndexLockedError when another writer holds the index.
        """
        from tqdm import tqdm

        writer = self._writer()
        report = IngestReport()
        analyser = _Analyser(self.chunk_chars, workers)
        batch: list[tuple[Document, str]] = []
        batch_ids: set[str] = set()
        try:
            known = self.revisions()
            seen: set[str] = set()
            bar = tqdm(documents, unit="doc", file=sys.stderr,
                       disable=not progress or not sys.stderr.isatty(), desc=f"index {self.name}")
            for item in bar:
                if isinstance(item, IngestError):
                    where = item.file if item.line is None else f"{item.file}:{item.line}"
                    report.errors.append((where, item.reason))
                    continue
                revision = document_revision(item)
                previous = known.get(item.id)
                if item.id in seen:
                    report.updated += 1
                elif previous == revision:
                    seen.add(item.id)
                    report.unchanged += 1
                    continue
                elif previous is None:
                    report.added += 1
                else:
                    report.updated += 1
                seen.add(item.id)
                if item.id in batch_ids:
                    # A delete only affects documents added before it: add the queued copy first.
                    report.chunks += analyser.add(writer, batch)
                    batch, batch_ids = [], set()
                if previous is not None or item.id in known:
                    writer.delete_documents_by_term("doc_id", item.id)
                known[item.id] = revision
                batch.append((item, revision))
                batch_ids.add(item.id)
                if len(batch) >= INGEST_BATCH_DOCS:
                    report.chunks += analyser.add(writer, batch)
                    batch, batch_ids = [], set()
            report.chunks += analyser.add(writer, batch)
            bar.close()
            if delete_missing:
                if report.errors:
                    report.errors.append(
                        ("(delete-missing)", f"skipped: {len(report.errors)} input error(s)"))
                else:
                    for doc_id in sorted(set(known) - seen):
                        writer.delete_documents_by_term("doc_id", doc_id)
                        report.deleted += 1
            writer.commit()
        except BaseException:
            writer.rollback()
            raise
        finally:
            analyser.close()
            writer.wait_merging_threads()
        self.maybe_reload(force=True)
        return report


class IndexStore:
    """The folder of named indexes. `open` results are cached (one reader per index)."""

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.monotonic,
                 dense: Mapping[str, DenseConfig] | None = None) -> None:
        """root: the folder of indexes. dense: index name → its hybrid settings; those indexes
        open as `indexes.dense.index.HybridIndex` (the others stay lexical)."""
        self.root = Path(root)
        self._clock = clock
        self.dense: Mapping[str, DenseConfig] = dense or {}
        self._open: dict[str, KnowledgeIndex] = {}
        self._lock = threading.Lock()

    def _folder(self, name: str) -> Path:
        if not _NAME.fullmatch(name):
            raise IndexStoreError(name, f"Index name {name!r} must match {_NAME.pattern}.")
        return self.root / name

    def names(self) -> list[str]:
        """Sorted names of the indexes under root (folders holding a meta.json)."""
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if (p / "meta.json").is_file())

    def open(self, name: str) -> KnowledgeIndex:
        """The index `name`, opened once and cached. Raises IndexNotFoundError,
        SchemaVersionError."""
        with self._lock:
            cached = self._open.get(name)
            if cached is not None:
                return cached
            folder = self._folder(name)
            if not (folder / "meta.json").is_file():
                raise IndexNotFoundError(name, str(folder))
            meta = check_sidecar(folder, name)
            index = tantivy.Index.open(str(folder))
            register_analyzers(index)
            ki = self._make(name, folder, index, int(meta.get("chunk_chars", DEFAULT_MAX_CHARS)))
            self._open[name] = ki
            return ki

    def create_or_open_for_write(self, name: str, *, chunk_chars: int = DEFAULT_MAX_CHARS) -> KnowledgeIndex:
        """Open `name` for `ingest`, creating the folder, schema and sidecar if absent.

        chunk_chars applies to a new index; an existing one keeps the size in its
        sidecar. Raises SchemaVersionError for an index of another schema version.
        """
        folder = self._folder(name)
        if (folder / "meta.json").is_file():
            meta = check_sidecar(folder, name)
            index = tantivy.Index.open(str(folder))
            chunk_chars = int(meta.get("chunk_chars", chunk_chars))
        else:
            folder.mkdir(parents=True, exist_ok=True)
            index = tantivy.Index(build_schema(), path=str(folder))
            write_sidecar(folder, {"chunk_chars": chunk_chars})
        register_analyzers(index)
        return self._make(name, folder, index, chunk_chars, warm=False)

    def _make(self, name: str, folder: Path, index: tantivy.Index, chunk_chars: int, *,
              warm: bool = True) -> KnowledgeIndex:
        dense = self.dense.get(name)
        if dense is None:
            return KnowledgeIndex(name, folder, index, clock=self._clock, chunk_chars=chunk_chars)
        from .dense.index import HybridIndex

        return HybridIndex(name, folder, index, dense=dense, store_root=self.root, clock=self._clock,
                           chunk_chars=chunk_chars, warm=warm)
