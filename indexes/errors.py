"""Errors raised by the index layer.

    IndexStoreError                 base; `name` is the index name
    ├── IndexNotFoundError          no such index under the store root
    ├── SchemaVersionError          index built by another schema version (rebuild it)
    └── IndexLockedError            another writer holds the index (Tantivy LockBusy)
"""

from __future__ import annotations

__all__ = ["IndexLockedError", "IndexNotFoundError", "IndexStoreError", "SchemaVersionError"]


class IndexStoreError(Exception):
    """Base of index-layer errors; the message is built once from structured fields."""

    def __init__(self, name: str, message: str) -> None:
        self.name = name
        super().__init__(message)


class IndexNotFoundError(IndexStoreError):
    def __init__(self, name: str, path: str) -> None:
        self.path = path
        super().__init__(name, f"Index {name!r} does not exist at {path}.")


class SchemaVersionError(IndexStoreError):
    def __init__(self, name: str, path: str, found: object, expected: int) -> None:
        self.path, self.found, self.expected = path, found, expected
        super().__init__(
            name,
            f"Index {name!r} at {path} has schema version {found!r}, this kbgate needs "
            f"{expected}: rebuild it: delete the folder {path} and run `kbgate index add --config "
            f"FILE --index {name} PATH...` again with the same sources.",
        )


class IndexLockedError(IndexStoreError):
    def __init__(self, name: str, path: str) -> None:
        self.path = path
        super().__init__(
            name,
            f"Index {name!r} at {path} is being written by another process (Tantivy writer "
            "lock busy); wait for it to finish and retry.",
        )
