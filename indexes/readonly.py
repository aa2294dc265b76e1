"""Serving an index folder this process cannot write: a read-only mount (compose `:ro`,
Kubernetes `readOnly: true`) or a folder of another user (rationale: docs/indexes.md,
"Read-only index folders").

Rationale: docs/design-notes.md, "indexes/readonly.py".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path

import tantivy

__all__ = ["META_LOCK", "SHADOW_PREFIX", "Shadow", "pid_namespace", "read_only", "sweep"]

META = "meta.json"
META_LOCK = ".tantivy-meta.lock"  # taken by every Tantivy reader (flock on a file opened for writing)
SHADOW_PREFIX = "kbgate-ro-"  # <tmp>/kbgate-ro-<pid namespace>-<pid>-<index>-<random>/
# Lock files are Tantivy's (and kbgate's) own in the shadow, never links to the read-only ones.
_NOT_LINKED = {META, META_LOCK, ".tantivy-writer.lock", ".kbgate-create.lock"}
_READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}


def read_only(folder: Path) -> bool:
    """True when this process cannot write the existing index folder `folder` (a read-only
    file system, or no write permission): Tantivy could not take its reader's lock there.
    Probes by opening the lock file for writing (creating it, as Tantivy would, when absent)."""
    try:
        fd = os.open(Path(folder) / META_LOCK, os.O_WRONLY | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno in _READ_ONLY_ERRNOS:
            return True
        raise
    os.close(fd)
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pid_namespace() -> str:
    """An id of this process's PID namespace (the inode of /proc/self/ns/pid; '0' where there
    is none): a pid means a process only within its namespace (two containers may share a /tmp)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def sweep(tmp: Path | None = None) -> int:
    """Remove the shadows of processes that are gone (killed before they could remove their
    own) from the temporary folder; returns how many. Only this user's, of this PID namespace."""
    base = Path(tmp if tmp is not None else tempfile.gettempdir())
    removed = 0
    ns = pid_namespace()
    with contextlib.suppress(OSError):
        for p in base.glob(f"{SHADOW_PREFIX}{ns}-*"):
            pid = p.name[len(SHADOW_PREFIX) + len(ns) + 1:].split("-", 1)[0]
            try:
                mine = p.is_dir() and not p.is_symlink() and p.stat().st_uid == os.getuid()
            except OSError:
                continue
            if mine and pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                shutil.rmtree(p, ignore_errors=True)
                removed += 1
    return removed


class Shadow:
    """A private writable folder standing for the read-only index folder `source` (module
    doc). `path` is what Tantivy opens; it is empty until the first `refresh`. Not thread-safe:
    the index's reload lock serialises `refresh`. Raises OSError when the temporary folder
    cannot be written."""

    def __init__(self, source: Path, name: str) -> None:
        self.source = Path(source)
        sweep()
        self.path = Path(tempfile.mkdtemp(prefix=f"{SHADOW_PREFIX}{pid_namespace()}-{os.getpid()}-{name}-"))
        self._linked: set[str] = set()
        self._meta: bytes | None = None
        self._finalizer = weakref.finalize(self, shutil.rmtree, str(self.path), True)

    def refresh(self) -> bool:
        """Link the files of the folder's current commit and show that commit's `meta.json`;
        True when the shadow's `meta.json` changed. A file gone from the folder loses its
        link (a reader keeps the files it has mapped). Raises OSError when `meta.json` of the
        source cannot be read (the shadow keeps the commit it showed)."""
        meta = (self.source / META).read_bytes()  # first: every file this commit names is on disk
        names = {e.name for e in os.scandir(self.source) if e.name not in _NOT_LINKED and e.is_file()}
        for n in sorted(names - self._linked):
            with contextlib.suppress(FileExistsError):
                os.symlink(self.source / n, self.path / n)
        for n in self._linked - names:
            with contextlib.suppress(FileNotFoundError):
                (self.path / n).unlink()
        self._linked = names
        if meta == self._meta:
            return False
        tmp = self.path / f".{META}.tmp"
        tmp.write_bytes(meta)
        os.replace(tmp, self.path / META)
        self._meta = meta
        return True

    def reload(self, index: tantivy.Index) -> None:
        """`refresh`, then `index.reload()` (Tantivy opened `path`), holding the source's reader
        lock as Tantivy's readers do, so a writer's clean-up (`kbgate index add`, `kbgate index
        fetch`) deletes no file of the commit being opened: a lock on a file opened only for
        reading, which local file systems grant on a read-only mount; where it is refused (NFS
        grants exclusive locks only to writers) the reload is retried twice instead when a file
        of the commit just linked was removed (a newer commit is linked then). Raises
        ValueError (Tantivy), OSError (the source's meta.json unreadable)."""
        with self._source_lock():
            for attempt in range(3):
                self.refresh()
                try:
                    index.reload()
                    return
                except ValueError:
                    if attempt == 2:
                        raise

    @contextlib.contextmanager
    def _source_lock(self) -> Iterator[None]:
        """Hold flock(LOCK_EX) on the source's META_LOCK opened read-only, when granted."""
        try:
            fd = os.open(self.source / META_LOCK, os.O_RDONLY)
        except OSError:
            yield
            return
        try:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def close(self) -> None:
        """Remove the shadow folder (idempotent)."""
        self._finalizer()
