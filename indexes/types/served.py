"""`ServedIndex`: the surface of one index that the gateway uses, whatever serves it.

Rationale: docs/design-notes.md, "indexes/types/served.py".
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .documents import ChunkView, Document, DocumentRow
from .search import Dials, Hit, IndexStats, MetaFilter, SearchBounds, SearchFilter, StoredDocument
from .writes import ChangeSet, DocumentHead, IngestError, IngestReport, IngestWarning

__all__ = ["ServedIndex"]


@runtime_checkable
class ServedIndex(Protocol):
    """One opened index (docs/scaling.md, "The cut in indexes/", has the table of who uses what).

    name: the index's name. synonyms: the owner's synonyms, set by the gateway per request.
    rerank: its rerank stage or None. bounds: per-query work bounds, set by the gateway on a
    config reload. search_may_wait: True when a search waits on I/O (a model, a remote engine):
    the core then searches in a worker thread. model_ready: it answers as configured now (a hybrid
    index's query model has loaded). clean_at_ingest: its text was cleaned when indexed (served as
    stored). generation: a label that grows with every committed change (None: unknown);
    incarnation: with it, names what the index shows (the answer cache keys on both); commit: a
    label /readyz shows, equal on every replica serving the same commit. path: the local folder
    of its writer's records (`indexes.changes`; for a Tantivy index, the index itself).
    Errors: the index layer's `IndexStoreError` (an engine down: `IndexUnavailableError`),
    OSError or ValueError, which the core turns into its retryable unavailable answer.
    """

    name: str
    synonyms: Any  # indexes.synonyms.Synonyms | None (named here, types/ would import its users)
    rerank: Any  # indexes.rerank.RerankStage | None
    bounds: SearchBounds
    search_may_wait: bool
    clean_at_ingest: bool
    incarnation: int
    commit: str | None
    path: Path

    @property
    def model_ready(self) -> bool: ...

    @property
    def generation(self) -> int | None: ...

    def maybe_reload(self, *, force: bool = False) -> bool: ...

    def search(self, query: str, limit: int = 10, *, filter: SearchFilter | None = None,
               one_per_document: bool = True, summary_chars: int = 200, content_chars: int = 1500,
               where: MetaFilter | None = None, floor: float = 0.0, dials: Dials = ...) -> list[Hit]: ...

    def answer(self, query: str, limit: int, *, filter: SearchFilter | None = None, one_per_document: bool = True,
               summary_chars: int = 200, content_chars: int = 1500, where: MetaFilter | None = None,
               floor: float = 0.0, dials: Dials = ...) -> tuple[list[Hit], int | None]: ...

    def question(self, query: str) -> Any: ...  # indexes.relevance.Question

    def with_neighbours(self, hits: list[Hit], n: int, content_chars: int) -> list[Hit]: ...

    def get_document(self, doc_id: str, *, include_hidden: bool = False) -> StoredDocument | None: ...

    def doc_id_at(self, path: str, datasets: tuple[str, ...] | None = None) -> str | None: ...

    def revisions(self) -> dict[str, str]: ...

    def heads(self, ids: Iterable[str]) -> dict[str, DocumentHead]: ...

    def stats(self) -> IndexStats: ...

    def ingest(self, documents: Iterable[Document | IngestError | IngestWarning], *, delete_missing: bool = False,
               progress: bool = True, workers: int | None = None, replace: bool = False) -> IngestReport: ...

    def apply(self, changes: ChangeSet, *, progress: bool = False, workers: int | None = 1) -> IngestReport: ...

    def close(self) -> None: ...

    # the owner's view (the console, sync): hidden documents included
    def document_rows(self) -> list[DocumentRow]: ...

    def hidden_count(self) -> int: ...

    def chunk_views(self, doc_id: str) -> list[ChunkView]: ...

    def as_document(self, doc_id: str, *, qa_visible: bool | None = None) -> Document | None: ...

    def holders(self) -> dict[str, tuple[str, str]]: ...
