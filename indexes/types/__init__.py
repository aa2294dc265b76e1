"""Shapes shared by the index layer and its callers.

Rationale: docs/design-notes.md, "indexes/types/__init__.py".
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
