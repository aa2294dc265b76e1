"""Shapes shared by the index layer and its callers.

The index layer knows nothing of HTTP: the gateway hands it a query string, a
limit and a `SearchFilter`, and gets `Hit`s back. Ingest readers turn files into
`Document`s; the chunker turns a `Document` into `Chunk`s; the store indexes
chunks and answers searches.

Field meanings follow the Volcengine knowledge callback result item (seed 003,
"Result"): `Id`, `Title`, `Summary`, `PublishTime`, `Url`, `CoverImage`,
`KnowledgeContent`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

MetaScalar: TypeAlias = str | int | float
MetaValue: TypeAlias = MetaScalar | tuple[MetaScalar, ...]
Metadata: TypeAlias = tuple[tuple[str, MetaValue], ...]
"""A document's kept metadata: (name, value) pairs sorted by name, names unique. A value is a
string, a number or a tuple of them (a list of tags). What readers keep, and its bounds:
`indexes.ingest.metadata`; how it is indexed and filtered on: `indexes.metadata`."""


@dataclass(frozen=True, slots=True)
class CoverImage:
    """A cover picture: height and width in pixels, url absolute."""

    url: str
    height: int | None = None
    width: int | None = None


@dataclass(frozen=True, slots=True)
class Section:
    """One section of a source document: heading text (may be '') and plain body text.

    trail: the headings above this one below the page's top level, outermost first, joined
    by " / " (Markdown "## 配置" above "### 参数" gives "配置" for the latter); '' when none.
    Indexed with the section's chunks, not shown.
    page: the 1-based page (PDF) or slide (PPTX) the section starts on, None where the format
    has no pages; each chunk carries the page it starts on as its `page` metadata.
    """

    heading: str
    text: str
    trail: str = ""
    page: int | None = None


@dataclass(frozen=True, slots=True)
class Document:
    """One source document as read by an ingest reader, before chunking.

    id: stable document id (JSONL `id`, or the Markdown path relative to the
        ingested folder, with forward slashes).
    sections: the plain text of the document in order; a JSONL record or a plain
        text file is one section with heading ''.
    publish_time: unix seconds, or None when unknown.
    path: the tree path used by scope path globs ('' for JSONL unless given).
    dataset: the dataset name used by scope policies ('' when not given).
    qa_visible: False hides the document from every search and read.
    metadata: further front-matter / JSONL fields kept for filtering (`Metadata`).
    origin: where it was read, for reports ("rows.jsonl:3", "guide/a.md"; '' when built in
        code). Not indexed, not part of the revision, not compared.
    source: the real path of the file it was read from ('' when built in code); stored on
        chunk 0, so a later run never replaces it from another file unasked
        (`indexes.writer.ingest`). Not part of the revision, not compared.
    """

    id: str
    title: str
    sections: tuple[Section, ...]
    url: str | None = None
    summary: str | None = None
    publish_time: int | None = None
    cover_image: CoverImage | None = None
    path: str = ""
    dataset: str = ""
    qa_visible: bool = True
    metadata: Metadata = ()
    origin: str = field(default="", compare=False)
    source: str = field(default="", compare=False)

    @property
    def text(self) -> str:
        """The whole plain text: section headings and bodies joined by newlines."""
        parts: list[str] = []
        for s in self.sections:
            if s.heading:
                parts.append(s.heading)
            if s.text:
                parts.append(s.text)
        return "\n".join(parts)


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What a scope allows inside one index. None means "no restriction".

    datasets: documents whose `dataset` is one of these.
    path_globs: documents whose `path` matches one of these globs
        ('*' within a segment, '**' across segments).
    exclude_path_globs: documents whose path or id matches any of these, ignoring case and
        leading '.', '/' (`indexes.search.exclusion_regex`), are never returned.
    include_hidden: also return documents with qa_visible=False (never set by callers
        that serve Q&A).
    Filtering never changes scores (const-score filter clauses).
    """

    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    exclude_path_globs: tuple[str, ...] = ()
    include_hidden: bool = False


# Dify's comparison operators (api/core/rag/entities/metadata_entities.py), plus the ASCII
# spellings Dify's own filter also takes for three of them.
META_OPERATORS = ("contains", "not contains", "start with", "end with", "is", "is not", "empty", "not empty",
                  "in", "not in", "=", "≠", ">", "<", "≥", "≤", "before", "after")
META_ALIASES = {"!=": "≠", ">=": "≥", "<=": "≤"}


@dataclass(frozen=True, slots=True)
class MetaCondition:
    """One condition on a document's metadata (`indexes.metadata` says what each operator means).

    name: a metadata name (a built-in such as 'path' or a kept field). operator: one of
    META_OPERATORS. value: a string, a number, a tuple of them, or None (empty / not empty).
    Raises ValueError for an unknown operator.
    """

    name: str
    operator: str
    value: MetaValue | None = None

    def __post_init__(self) -> None:
        if self.operator not in META_OPERATORS:
            raise ValueError(f"unknown metadata operator {self.operator!r}")


@dataclass(frozen=True, slots=True)
class MetaFilter:
    """Conditions joined by `logic` ('and' | 'or'): narrows a search inside its scope filter,
    evaluated in the Tantivy query (never after it). No conditions → no narrowing."""

    logic: str = "and"
    conditions: tuple[MetaCondition, ...] = ()

    def __post_init__(self) -> None:
        if self.logic not in ("and", "or"):
            raise ValueError(f"logic must be 'and' or 'or', not {self.logic!r}")


@dataclass(frozen=True, slots=True)
class Scores:
    """Raw per-stage scores of one hit; None where the stage did not run.

    bm25: Tantivy's BM25 score (unbounded, comparable only within one search).
    dense: cosine similarity of query and chunk vectors, -1..1.
    fused: the hybrid fusion's score.
    rerank: the reranker's relevance, 0..1.
    """

    bm25: float | None = None
    dense: float | None = None
    fused: float | None = None
    rerank: float | None = None


@dataclass(frozen=True, slots=True)
class Hit:
    """One search result: the best chunk of one document.

    id: '{doc_id}' when the document has one chunk, else '{doc_id}#{chunk}'.
    summary: a query-biased plain-text excerpt of the chunk, at most
        `summary_chars` characters (characters, not bytes).
    content: the matched chunk with its section heading, at most `content_chars` characters.
    score: BM25 score (higher is better), comparable only within one search; on a hybrid
        index the fused score (`indexes.dense.fusion`).
    revision: SHA-256 hex of the document's title + full text at index time.
    publish_time: unix seconds in 0001..9999 as `indexes.publish_time.stored` reads the stored
        value (13-digit milliseconds of an older index converted, anything else None).
    relevance: the one scale, 0..1, with the same meaning for every caller and index kind
        (the reranker's where one ran); what wings show, floors compare and merges sort by.
    scores: the raw score of each stage that ran (`Scores`).
    """

    id: str
    doc_id: str
    chunk: int
    title: str
    summary: str
    content: str
    score: float
    url: str | None = None
    publish_time: int | None = None
    cover_image: CoverImage | None = None
    path: str = ""
    dataset: str = ""
    revision: str = ""
    metadata: Metadata = ()
    relevance: float = 0.0
    scores: Scores = Scores()


@dataclass(frozen=True, slots=True)
class StoredDocument:
    """A whole document read back from an index (for read-by-reference tools); publish_time as
    `Hit.publish_time` (`indexes.publish_time.stored`)."""

    doc_id: str
    title: str
    text: str
    revision: str
    url: str | None = None
    summary: str | None = None
    publish_time: int | None = None
    path: str = ""
    dataset: str = ""
    qa_visible: bool = True
    metadata: Metadata = ()


@dataclass(frozen=True, slots=True)
class IndexStats:
    """Counts for `kbgate index stats` and metrics. generation: increases with every commit
    (opstamp). last_commit: unix seconds or None."""

    name: str
    documents: int
    chunks: int
    generation: int
    last_commit: float | None
    size_bytes: int


@dataclass(frozen=True, slots=True)
class SearchBounds:
    """Upper bounds of the work one search does, whatever the documents.

    max_chunks_per_query: chunk hits taken from Tantivy for one query, over all its rounds
        (their document keys are read from a fast field; no stored document is loaded).
    max_chunks_per_document: stored chunks loaded for one result: its best chunk and at
        most this many minus one more matching chunks for its content (KnowledgeContent).
    So one search loads at most limit × max_chunks_per_document stored chunks, however many
    chunks one document has (issue 9: a 35,818-chunk document made every matching callback
    take 250–300 ms). Raises ValueError for a bound below 1.
    """

    max_chunks_per_query: int = 2000
    max_chunks_per_document: int = 8

    def __post_init__(self) -> None:
        if self.max_chunks_per_query < 1 or self.max_chunks_per_document < 1:
            raise ValueError(f"SearchBounds must be at least 1: {self}")


DEFAULT_BOUNDS = SearchBounds()


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Upserts and deletes to apply to one index in one commit, all or nothing (`indexes.changes`).

    upserts: documents, each replacing the document of its id (unchanged revisions skipped).
    deletes: ids to delete. An id may appear once in the whole set (ValueError otherwise).
    replace: replace a document indexed from another source (`Document.source`).
    datasets: the datasets whose documents `deletes` may delete (None: any); a delete of a
    document of another dataset refuses the set.
    """

    upserts: tuple[Document, ...] = ()
    deletes: tuple[str, ...] = ()
    replace: bool = False
    datasets: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for doc_id in [d.id for d in self.upserts] + list(self.deletes):
            if doc_id in seen:
                raise ValueError(f"id {doc_id!r} appears more than once in one change set")
            seen.add(doc_id)

    @property
    def ids(self) -> list[str]:
        """Every id the set touches: the upserts', then the deletes'."""
        return [d.id for d in self.upserts] + list(self.deletes)


@dataclass(frozen=True, slots=True)
class DocumentHead:
    """What an index holds about one document, read from its first chunk: revision (SHA-256
    hex, `indexes.records.document_revision`), dataset, path and source ('' when none)."""

    doc_id: str
    revision: str
    dataset: str = ""
    path: str = ""
    source: str = ""


@dataclass(slots=True)
class IngestReport:
    """What one write did (a `kbgate index add` run, a change set: `indexes.changes`).

    errors: (where, reason) for each file or record skipped because it failed (unreadable,
        malformed, over the size limit); any error makes `--delete-missing` not run. warnings:
        (where, message) for what was read but not indexed as given: a duplicate id overridden
        by a later record, an empty file skipped, `--delete-missing` not run. where: a file,
        "file:line" for a JSONL record, or an option name.
    changes: doc_id → 'added' | 'updated' | 'unchanged' | 'deleted' | 'absent' (a delete of an
        id the index did not hold). refused: doc_id → why the writer refused it (also a line of
        `errors`): 'dataset' (another dataset holds it, or a delete outside the datasets
        allowed), 'source' (indexed from another source), 'invalid' (a value it cannot store).
    commit: the opstamp (generation) of the commit made, None when none was made.
    """

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    changes: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    commit: int | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed unit: a piece of one section of a document.

    n: 0-based position of the chunk within its document.
    heading: the heading of the section the chunk comes from ('' if none).
    text: the chunk body (plain text, characters of the section, in order).
    overlap: how many leading characters of `text` repeat the end of the previous
        chunk of the same section (0 for the first piece of a section); dropping
        them and concatenating the pieces gives the section text back.
    section: 0-based index of the section within the document.
    page: the page (`Section.page`) the chunk starts on, None where the format has none.
    """

    doc_id: str
    n: int
    heading: str
    text: str
    overlap: int = 0
    section: int = 0
    page: int | None = None

    def __post_init__(self) -> None:
        if self.n < 0 or not 0 <= self.overlap <= len(self.text):
            raise ValueError(f"Chunk {self.doc_id}#{self.n}: bad n or overlap {self.overlap}")


INGEST_ERROR_KINDS = ("unsupported", "encrypted", "no_text", "too_large", "corrupt", "unreadable", "invalid")
"""Why a file was not ingested: a type no converter reads, an encrypted file, a scanned image
without a text layer, over the size limit, a file its converter cannot parse, one that cannot
be read (permissions, not UTF-8), or a record or field refused (JSONL, front matter)."""


@dataclass(frozen=True, slots=True)
class _Note:
    """What an ingest reader says about a file: file (the path as given/walked), reason, line
    (1-based line number for JSONL, else None)."""

    file: str
    reason: str
    line: int | None = None

    @property
    def where(self) -> str:
        """'file' or 'file:line'."""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class IngestError(_Note):
    """A file (or one JSONL line) that an ingest reader skipped. kind: why, for callers that
    map it to codes: one of INGEST_ERROR_KINDS ('' before a reader set one: an input error of
    another kind)."""

    kind: str = ""


@dataclass(frozen=True, slots=True)
class IngestWarning(_Note):
    """Something an ingest reader read but did not keep as given, and why: a file it did not
    turn into a document (it is empty, or a symlink to a file read under its own path), a
    publish_time read as milliseconds (`indexes.publish_time`), or a metadata field of a
    document it indexed without that field (`indexes.ingest.metadata`). Unlike an IngestError
    it does not stop `--delete-missing`: an empty file holds no document, so an earlier version
    of it is deleted like any document no longer present.
    """
