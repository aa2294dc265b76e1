"""Shapes shared by the index layer and its callers.

The index layer knows nothing of HTTP: the gateway hands it a query string, a
limit and a `SearchFilter`, and gets `Hit`s back. Ingest readers turn files into
`Document`s; the chunker turns a `Document` into `Chunk`s; the store indexes
chunks and answers searches.

Field meanings follow the Volcengine knowledge callback result item (seed 003,
"Result"): `Id`, `Title`, `Summary`, `PublishTime`, `Url`, `CoverImage`,
`KnowledgeContent`.

The shapes live in three modules by concern (documents, search, writes); import them from here.
"""

from .documents import ChunkView, CoverImage, Document, DocumentRow, Metadata, MetaScalar, MetaValue, Section
from .search import (
    DEFAULT_BOUNDS,
    META_ALIASES,
    META_OPERATORS,
    NO_DIALS,
    Dials,
    Hit,
    IndexStats,
    MetaCondition,
    MetaFilter,
    Scores,
    SearchBounds,
    SearchFilter,
    StoredDocument,
)
from .writes import (
    INGEST_ERROR_KINDS,
    ChangeSet,
    Chunk,
    DocumentHead,
    GenerationSource,
    IngestError,
    IngestReport,
    IngestWarning,
    SourceMissing,
)

__all__ = [
    "ChangeSet", "Chunk", "ChunkView", "DocumentRow",
    "CoverImage", "DEFAULT_BOUNDS", "Dials", "Document", "DocumentHead", "GenerationSource",
    "Hit", "INGEST_ERROR_KINDS", "IndexStats", "IngestError", "IngestReport", "IngestWarning", "META_ALIASES",
    "META_OPERATORS", "MetaCondition", "NO_DIALS", "MetaFilter", "MetaScalar", "MetaValue", "Metadata", "Scores",
    "SearchBounds", "SearchFilter", "Section", "SourceMissing", "StoredDocument",
]
from .backends import CONSISTENCY_LEVELS, MilvusConfig  # noqa: E402
from .served import ServedIndex  # noqa: E402  (it names the shapes above)

__all__ += ["CONSISTENCY_LEVELS", "MilvusConfig", "ServedIndex"]
