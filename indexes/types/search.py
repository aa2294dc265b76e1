"""What a search takes (filters, bounds) and gives (hits, scores, stored documents, stats)."""

from __future__ import annotations

from dataclasses import dataclass

from .documents import CoverImage, Metadata, MetaValue


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
class Dials:
    """A route's retrieval dials (`[[tenants.*.routes]]`, `[agent.routes.NAME]`): each overrides
    its index's setting for that route's searches only; None (0 for neighbours) keeps the index's.

    dense_share: 0..1, the dense side's share of the hybrid fusion's weights (the index's
        lexical_weight + dense_weight split (1 - share) : share); hybrid indexes only.
    candidates: chunks taken into the fusion (each side) and handed to the reranker, >= 1.
    rerank: False skips the index's rerank stage; True (or None) runs it where one is configured.
    rerank_threshold: 0..1, a hit the reranker scored under it is dropped; the route's relevance
        floor then judges the relevance retrieval gave, before the reranker (docs/hybrid-retrieval.md).
    neighbours: a hit's content is its chunk with up to this many chunks before and after it in
        its document, in document order (`indexes.neighbours`), instead of further matching chunks.
    summary_chars: the budget of a hit's Summary / snippet in characters (`indexes.passages`),
        20..4000, whatever the caller asks; a Dify route that sets it answers with the snippet.
    """

    dense_share: float | None = None
    candidates: int | None = None
    rerank: bool | None = None
    rerank_threshold: float | None = None
    neighbours: int = 0
    summary_chars: int | None = None


NO_DIALS = Dials()


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
    summary: the passage of the chunk (and of the further chunks its content carries) that answers
        the question (`indexes.passages`), at most `summary_chars` characters (not bytes).
    content: the matched chunk with its section heading, at most `content_chars` characters.
    score: BM25 score (higher is better), comparable only within one search; on a hybrid
        index the fused score (`indexes.dense.fusion`).
    revision: SHA-256 hex of the document's title + full text at index time.
    publish_time: unix seconds in 0001..9999 as `indexes.publish_time.stored` reads the stored
        value (13-digit milliseconds of an older index converted, anything else None).
    relevance: the one scale, 0..1, with the same meaning for every caller and index kind
        (the reranker's where one ran); what wings show, floors compare and merges sort by.
    scores: the raw score of each stage that ran (`Scores`). heading: the chunk's section heading.
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
    heading: str = ""


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
    """Counts for `kbgate index stats` and metrics.

    generation: increases with every commit (opstamp). last_commit: unix seconds or None.
    commit: the commit's label, '{opstamp}-{12 hex of meta.json's digest}' (`indexes.stats.
    commit_label`): equal on every replica serving the same commit, whether built or fetched.
    """

    name: str
    documents: int
    chunks: int
    generation: int
    last_commit: float | None
    size_bytes: int
    commit: str | None = None


@dataclass(frozen=True, slots=True)
class SearchBounds:
    """Upper bounds of the work one search does, whatever the documents.

    max_chunks_per_query: chunk hits taken from Tantivy for one query, over all its rounds
        (their document keys are read from a fast field; no stored document is loaded).
    max_chunks_per_document: stored chunks loaded for one result: its best chunk and at
        most this many minus one more matching chunks for its content (KnowledgeContent).
    So one search loads at most limit × max_chunks_per_document stored chunks, however many
    chunks one document has (a 35,818-chunk document made every matching callback
    take 250–300 ms). Raises ValueError for a bound below 1.
    """

    max_chunks_per_query: int = 2000
    max_chunks_per_document: int = 8

    def __post_init__(self) -> None:
        if self.max_chunks_per_query < 1 or self.max_chunks_per_document < 1:
            raise ValueError(f"SearchBounds must be at least 1: {self}")


DEFAULT_BOUNDS = SearchBounds()
