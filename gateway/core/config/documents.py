"""`[documents]`: the document API's bounds (gateway/documents/), and the shape it is read into.

Rationale: docs/design-notes.md, "gateway/core/config/documents.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.types import KIB, MIB, SECONDS
from gateway.core.validate import Fields
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_READ_BOUNDS, ReadBounds

__all__ = ["DocumentsConfig", "parse_documents"]


@dataclass(frozen=True, slots=True)
class DocumentsConfig:
    """The document API's bounds. Sizes in bytes, durations in seconds.

    max_body_bytes: one request's body (a JSON document, an uploaded file, a batch).
    max_batch_documents: upserts plus deletes of one batch.
    write_timeout_seconds: how long a write waits for the index's one writer while another
        holds it (another worker's write, `kbgate index add`, `kbgate sync`) before it is
        answered documents.writer_busy (nothing written).
    body_timeout_seconds: the whole body must arrive within it (else documents.body_timeout).
    max_document_bytes: one document (its JSON, or the file), `indexes.max_document_bytes`.
    read_bounds: what reading one file may take (`indexes.max_nesting`, ...: indexes.ingest.bounds).
    """

    max_body_bytes: int = 16 * MIB
    max_batch_documents: int = 1000
    write_timeout_seconds: float = 30.0 * SECONDS
    body_timeout_seconds: float = 60.0 * SECONDS
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES
    read_bounds: ReadBounds = DEFAULT_READ_BOUNDS


def parse_documents(t: Fields, max_document_bytes: int,
                    read_bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> DocumentsConfig:
    """The [documents] table → DocumentsConfig; max_document_bytes: `indexes.max_document_bytes`;
    read_bounds: the [indexes] table's reader bounds.
    Raises ConfigError naming the key (unknown keys, bounds out of range)."""
    t.only({"max_body_bytes", "max_batch_documents", "write_timeout_seconds", "body_timeout_seconds"})
    return DocumentsConfig(
        max_body_bytes=t.integer("max_body_bytes", 16 * MIB, lo=1 * KIB, hi=1024 * MIB),
        max_batch_documents=t.integer("max_batch_documents", 1000, lo=1, hi=100_000),
        write_timeout_seconds=t.number("write_timeout_seconds", 30.0, lo=0.0, hi=600.0),
        body_timeout_seconds=t.number("body_timeout_seconds", 60.0, lo=0.1, hi=3600.0),
        max_document_bytes=max_document_bytes,
        read_bounds=read_bounds,
    )
