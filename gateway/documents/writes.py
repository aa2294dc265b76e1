"""The document API's writes in one worker: one at a time per index, through the index's one
writer, answered after the commit (docs/document-api.md, "The single writer").

Rationale: docs/design-notes.md, "gateway/documents/writes.py".
"""

from __future__ import annotations

import asyncio
import logging

import anyio.to_thread

from gateway.core.errors import DocumentError
from gateway.core.runtime import Runtime
from indexes.changes import ChangeReport, apply_changes
from indexes.errors import (
    EmbeddingError,
    IndexLockedError,
    IndexNotFoundError,
    IndexReadOnlyError,
    IndexStoreError,
    SchemaVersionError,
    is_disk_full,
)
from indexes.types import ChangeSet

log = logging.getLogger("kbgate.documents")

BUSY_RETRY_AFTER_SECONDS = 1.0


class Writes:
    """The worker's writes (module doc). rt: the worker's runtime (its index store and config)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self._locks: dict[str, asyncio.Lock] = {}

    def exists(self, name: str) -> bool:
        """Does index `name` exist on disk (a delete never creates one)? False for a name no
        index may have (indexes.store's pattern): callers answer it as any unknown index."""
        try:
            return self.rt.indexes.exists(name)  # a folder holding an index, or one served by Milvus
        except IndexStoreError:
            return False

    def require(self, name: str) -> None:
        """Raise DocumentError documents.index_not_found unless index `name` exists: a write
        never creates an index (a mistyped name would make a new one); creating one is explicit."""
        if not self.exists(name):
            raise not_found(name)

    def create(self, name: str) -> bool:
        """Make index `name` empty (blocking: run it in a worker thread); False when it exists
        already (nothing changed). Raises IndexStoreError for a name no index may have, or a
        folder that cannot be written."""
        if self.exists(name):
            return False
        self.rt.indexes.create_or_open_for_write(name).close()
        return True

    async def apply(self, name: str, changes: ChangeSet) -> ChangeReport:
        """Apply `changes` to index `name` in one commit, all or nothing; returns the report
        (refusals included: the caller answers them). Raises DocumentError: index_not_found
        (`require`: nothing is created), writer_busy (the
        writer was not ours within documents.write_timeout_seconds), embedding_failed,
        index_unavailable (not retryable for a read-only index folder); nothing was written then."""
        self.require(name)
        timeout = self.rt.config.documents.write_timeout_seconds
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        lock = self._locks.setdefault(name, asyncio.Lock())
        try:
            async with asyncio.timeout(timeout):  # a cancelled acquire never leaves the lock held
                await lock.acquire()
        except TimeoutError:
            raise _busy(name, timeout) from None
        try:
            left = max(deadline - loop.time(), 0.0)
            return await anyio.to_thread.run_sync(self._apply, name, changes, left)
        except IndexLockedError:
            raise _busy(name, timeout) from None
        except IndexReadOnlyError as exc:  # the folder is mounted read-only here: never a retry's matter
            log.warning("document write refused: read-only index folder", extra={"index": name, "folder": exc.path})
            raise DocumentError("documents.index_unavailable", f"index {name!r} is read-only on this server (its "
                                "folder is mounted read-only; it is written by the indexer): nothing was written",
                                retryable=False) from None
        except EmbeddingError as exc:
            log.warning("document write refused: embedding failed", extra={"index": name, "problem": str(exc)[:200]})
            raise DocumentError("documents.embedding_failed", f"the embedding provider of index {name!r} failed "
                                                              "(nothing was written)",
                                retryable=exc.retryable) from None
        except (IndexStoreError, OSError, ValueError) as exc:
            log.warning("document write failed", extra={"index": name, "problem": str(exc)[:300]})
            reason = (exc.reason if isinstance(exc, IndexStoreError)
                      else "cannot be written: disk full" if is_disk_full(exc, str(self.rt.indexes.folder(name)))
                      else "cannot be written")
            raise DocumentError("documents.index_unavailable", f"index {name!r} {reason} (nothing was written)",
                                retryable=not isinstance(exc, SchemaVersionError)) from None
        finally:
            lock.release()

    def _apply(self, name: str, changes: ChangeSet, wait_seconds: float) -> ChangeReport:
        """In a worker thread: open a write handle, apply, close it, reload the served reader."""
        store = self.rt.indexes
        try:
            store.open(name)  # the served index first: a hybrid write handle borrows its model
        except IndexNotFoundError:
            pass  # made by `kbgate index create` after this worker last looked
        handle = store.create_or_open_for_write(name)
        try:
            log.info("document changes applying", extra={"index": name, "upserts": len(changes.upserts),
                                                         "deletes": len(changes.deletes)})
            report = apply_changes(handle, changes, wait_seconds=wait_seconds)
        finally:
            handle.close()
        if report.commit is not None:
            try:
                store.open(name).maybe_reload(force=True)  # this worker shows it at once
            except (IndexStoreError, OSError, ValueError):
                log.warning("index reload after a write failed", extra={"index": name})
            log.info("document changes committed", extra={"index": name, "commit": report.commit,
                                                          "chunks": report.chunks})
        return report


def not_found(name: str) -> DocumentError:
    """documents.index_not_found for index `name`, naming it and how one is created."""
    return DocumentError("documents.index_not_found", f"no index is named {name!r}: a write never creates one "
                                                      f"(check the name; to make it: kbgate index create {name}, or "
                                                      "Create index on the console's Indexes page)")


def _busy(name: str, timeout: float) -> DocumentError:
    return DocumentError("documents.writer_busy", f"another writer held index {name!r} for {timeout:g} s "
                                                  "(kbgate index add, a sync, or other writes): nothing was "
                                                  "written; retry", retry_after=BUSY_RETRY_AFTER_SECONDS)
