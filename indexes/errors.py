"""Errors raised by the index layer.

Rationale: docs/design-notes.md, "indexes/errors.py".
"""

from __future__ import annotations

import os

__all__ = [
    "EmbeddingError",
    "EmbeddingResponseError",
    "DiskFullError",
    "EmbeddingUnavailable",
    "GenerationError",
    "IndexCorruptError",
    "IndexLockedError",
    "IndexNotFoundError",
    "IndexReadOnlyError",
    "IndexStoreError",
    "IndexUnavailableError",
    "LOW_SPACE_BYTES",
    "RerankError",
    "RerankResponseError",
    "RerankUnavailable",
    "SchemaVersionError",
    "is_disk_full",
    "is_engine_panic",
]

_DISK_FULL_ERRNOS = (28, 122)  # ENOSPC, EDQUOT (Linux)
_DISK_FULL_WORDS = ("no space left on device", "os error 28", "disk quota exceeded", "os error 122",
                    "database or disk is full")


LOW_SPACE_BYTES = 16 * 1024 * 1024
"""Below this much free space (for unprivileged writers) on the device of an index, a failed
write is reported as a full disk: Tantivy's indexing threads hit ENOSPC where Python does not see
it, and the error that surfaces says only "An index writer was killed … (io::Error most
likely)". 16 MiB is less than one segment of a few hundred pages."""


def is_disk_full(exc: BaseException, folder: str | None = None) -> bool:
    """Is `exc` a write that found no space: an OSError of ENOSPC or EDQUOT, an error of Tantivy
    (a ValueError "… No space left on device (os error 28)") or SQLite ("database or disk is
    full") saying so, or (`folder` given: where the write went) any error while the device
    holding `folder` has under LOW_SPACE_BYTES free? Never raises."""
    if isinstance(exc, OSError) and exc.errno in _DISK_FULL_ERRNOS:
        return True
    text = str(exc).lower()
    if any(w in text for w in _DISK_FULL_WORDS):
        return True
    if folder is None:
        return False
    try:
        st = os.statvfs(folder)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < LOW_SPACE_BYTES


def is_engine_panic(exc: BaseException) -> bool:
    """True for a panic of Tantivy's Rust code surfacing through pyo3: `pyo3_runtime.
    PanicException`, a BaseException (not an Exception), raised e.g. when a stored-document
    block of a segment damaged in place is read ("Corrupted data. Invalid VInt"). Matched by
    type name and module: pyo3 exports no class to import."""
    t = type(exc)
    return t.__name__ == "PanicException" and t.__module__ == "pyo3_runtime"


class IndexStoreError(Exception):
    """Base of index-layer errors; the message is built once from structured fields.

    reason: what is wrong in a few words without paths ("missing", "damaged"), for places that
    must not show the server's folders (/readyz); the message says where and what to do.
    """

    reason = "unreadable"

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


class IndexNotFoundError(IndexStoreError):
    reason = "missing"

    def __init__(self, name: str, path: str) -> None:
        self.path = path
        super().__init__(name, f"Index {name!r} does not exist at {path}.")


class DiskFullError(IndexStoreError):
    reason = "cannot be written: disk full"

    def __init__(self, name: str, path: str) -> None:
        self.path = path
        super().__init__(name, f"Index {name!r} cannot be written: disk full (no space left on the device holding "
                               f"{path}); nothing of this write was committed: free space, then run it again.")


class SchemaVersionError(IndexStoreError):
    reason = "built by another schema version"

    def __init__(self, name: str, path: str, found: object, expected: int) -> None:
        self.path, self.found, self.expected = path, found, expected
        super().__init__(
            name,
            f"Index {name!r} at {path} has schema version {found!r}, this kbgate needs "
            f"{expected}: rebuild it: delete the folder {path} and run `kbgate index add --config "
            f"FILE --index {name} PATH...` again with the same sources.",
        )


class IndexCorruptError(IndexStoreError):
    """Tantivy refused to open the folder: meta.json unreadable, a segment file missing or
    truncated. detail: Tantivy's own words, cut to one line of at most 300 characters."""

    reason = "damaged"

    def __init__(self, name: str, path: str, detail: str) -> None:
        self.path = path
        self.detail = " ".join(detail.split())[:300]
        super().__init__(
            name,
            f"Index {name!r} at {path} is damaged, Tantivy cannot open it ({self.detail}). Restore "
            f"the folder from a copy, or rebuild it: delete the folder {path} and run `kbgate index "
            f"add --config FILE --index {name} PATH...` again with the same sources.",
        )


class IndexLockedError(IndexStoreError):
    reason = "locked by a writer"

    def __init__(self, name: str, path: str) -> None:
        self.path = path
        super().__init__(
            name,
            f"Index {name!r} at {path} is being written by another process (Tantivy writer "
            "lock busy); wait for it to finish and retry.",
        )


class IndexReadOnlyError(IndexStoreError):
    """The index folder cannot be written by this process (a read-only mount, or another
    user's folder): it is served as it is (`indexes.readonly`), never written. detail: what
    was refused, or what failed (a temporary folder that cannot be written either)."""

    reason = "read-only"

    def __init__(self, name: str, path: str, detail: str = "") -> None:
        self.path = path
        self.detail = detail or (
            "this process may serve it but not write it: write it where the folder is mounted "
            "read-write (the indexer's `kbgate index add`, `kbgate index fetch`, `kbgate sync`)")
        super().__init__(name, f"Index {name!r} at {path} is on a read-only folder: {self.detail}.")


class GenerationError(IndexStoreError):
    """A generation could not be published or installed: the store holds none or cannot be
    read, a file's checksum or size differs from its manifest, an object is missing, the
    manifest is damaged or of another schema version. The message says what and where (the
    store without credentials) and, on a replica, which commit keeps serving."""

    reason = "generation refused"


class IndexUnavailableError(IndexStoreError):
    """The engine serving index `name` did not answer in time or refused (`indexes.milvus`);
    `problem`: what it said, in a few words (never a question's text nor a token). Retryable."""

    reason = "unreachable"

    def __init__(self, name: str, problem: str) -> None:
        self.problem = problem
        super().__init__(name, f"Index {name!r} is not reachable: {problem}.")


class EmbeddingError(Exception):
    """An embedding provider gave no usable vectors.

    provider: the provider's name as configured ("openai", "local"); reason: a short
    machine-readable cause ("timeout", "connect", "http_503", "breaker_open", "bad_shape");
    retryable: whether the same call may succeed later. Messages never carry an API key
    or the embedded text.
    """

    retryable = False

    def __init__(self, provider: str, reason: str, detail: str = "") -> None:
        self.provider, self.reason, self.detail = provider, reason, detail
        super().__init__(f"embedding provider {provider!r}: {reason}" + (f" ({detail})" if detail else ""))


class EmbeddingUnavailable(EmbeddingError):
    """Down, slow, overloaded or refusing: a timeout, a connection error, HTTP 429 or 5xx,
    an open circuit breaker. A query falls back to lexical; ingest retries with backoff."""

    retryable = True


class EmbeddingResponseError(EmbeddingError):
    """The provider answered, but not with embeddings we can use (HTTP 4xx, not JSON, a wrong
    number or length of vectors, non-finite values)."""


class RerankError(Exception):
    """A reranker gave no usable relevance scores; the search keeps the order of the stage
    before (`indexes.rerank.stage`).

    provider: the configured wire format ("cohere", "tei", "dashscope"); reason: a short
    machine-readable cause ("timeout", "connect", "http_503", "bad_count", "not_scores").
    Messages never carry an API key, the query or a document's text.
    """

    def __init__(self, provider: str, reason: str, detail: str = "") -> None:
        self.provider, self.reason, self.detail = provider, reason, detail
        super().__init__(f"rerank provider {provider!r}: {reason}" + (f" ({detail})" if detail else ""))


class RerankUnavailable(RerankError):
    """Down, slow, overloaded or refusing: a timeout, a connection error, HTTP 408/429/5xx."""


class RerankResponseError(RerankError):
    """The reranker answered, but not with scores we can use (HTTP 4xx, not JSON, a missing or
    repeated index, a score that is not a finite number)."""
