"""Index generations for replicas: one commit of an index as immutable, checksummed files in a
shared store, written by the one writer (`publish`) and installed by every replica
(`indexes.fetch`), so no replica builds an index itself.

Rationale: docs/design-notes.md, "indexes/generations.py".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .changes import CHANGES_DB
from .errors import GenerationError, IndexLockedError, IndexNotFoundError
from .schema import CREATE_LOCK, SCHEMA_VERSION, SIDECAR, check_sidecar
from .stats import commit_label

__all__ = ["FORMAT", "GenerationError", "Published", "file_digest", "index_files", "manifest_problem", "publish"]

FORMAT = 1
LATEST = "LATEST"
META = "meta.json"
FETCH_RECORD = ".kbgate-fetch.json"  # what `indexes.fetch` installed (a replica's own file)
WRITER_LOCK = ".tantivy-writer.lock"  # Tantivy's IndexWriter lock (flock)
META_LOCK = ".tantivy-meta.lock"  # Tantivy's lock while a reader opens a commit's segments (flock)
DENSE = "dense"  # indexes.dense.vectors.DENSE_DIR (not imported: the dense package imports the store)
# A replica's own files and the writer's own records (the change log is a convenience of the
# writer's document API, never the authority: `indexes.changes`) are never published.
NOT_PUBLISHED = {WRITER_LOCK, META_LOCK, CREATE_LOCK, FETCH_RECORD, "LOCK",
                 CHANGES_DB, f"{CHANGES_DB}-journal", f"{CHANGES_DB}-wal", f"{CHANGES_DB}-shm"}
LOCK_WAIT = 60.0  # seconds `publish` waits for a running writer to finish
_SHA = re.compile(r"[0-9a-f]{64}")
_COMMIT = re.compile(r"[0-9]{1,20}-[0-9a-f]{12}")
CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Published:
    """What `publish` did. commit: the commit's label. files / total_bytes: in the generation.
    new_objects / copied_bytes: written to the store now (the others were there already).
    already: LATEST named this commit before. pruned: generations deleted (beyond `keep`)."""

    commit: str
    files: int
    total_bytes: int
    new_objects: int
    copied_bytes: int
    already: bool
    pruned: int


def object_path(name: str, sha256: str) -> str:
    """'<index>/objects/<2 hex>/<sha256>': where a file with this digest lives in the store."""
    return f"{name}/objects/{sha256[:2]}/{sha256}"


def manifest_path(name: str, commit: str) -> str:
    """'<index>/generations/<commit>.json'."""
    return f"{name}/generations/{commit}.json"


def index_files(folder: Path) -> list[str]:
    """The files of the index folder a generation holds (module docstring), as sorted relative
    '/' paths. Under dense/ only CURRENT and the generation folder it names are taken."""
    folder = Path(folder)
    current: str | None = None
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        current = str(orjson.loads((folder / DENSE / "CURRENT").read_bytes())["folder"])
    out = []
    for p in folder.rglob("*"):
        rel = p.relative_to(folder)
        parts = rel.parts
        if p.is_symlink() or not p.is_file() or p.name in NOT_PUBLISHED or any(
                x.endswith(".tmp") for x in parts):
            continue
        if parts[0] == DENSE and len(parts) > 1 and not (parts[1] == "CURRENT" or parts[1] == current):
            continue  # older vector generations, kept by the writer for its own readers
        out.append(rel.as_posix())
    return sorted(out)


def manifest_problem(m: Any, name: str, commit: str) -> str | None:
    """Why `m` (a parsed manifest) is not the generation `commit` of index `name` this kbgate
    can install, or None. Paths must stay inside the index folder."""
    if not isinstance(m, dict) or m.get("format") != FORMAT:
        return f"not a generation manifest of format {FORMAT}"
    if m.get("index") != name or m.get("commit") != commit:
        return f"names index {m.get('index')!r} commit {m.get('commit')!r}, not {name!r} {commit!r}"
    if m.get("schema_version") != SCHEMA_VERSION:
        return (f"was built by schema version {m.get('schema_version')!r}, this kbgate reads {SCHEMA_VERSION}: "
                "publish it again with this kbgate version (or upgrade this replica)")
    files = m.get("files")
    if not isinstance(files, dict) or META not in files or SIDECAR not in files:
        return f"lists no files, or not {META} and {SIDECAR}"
    for rel, f in files.items():
        parts = rel.split("/") if isinstance(rel, str) else []
        if not parts or rel.startswith("/") or "\\" in rel or any(x in ("", ".", "..") for x in parts):
            return f"lists a path outside the index folder: {rel!r}"
        if not (isinstance(f, dict) and isinstance(f.get("sha256"), str) and _SHA.fullmatch(f["sha256"])
                and isinstance(f.get("size"), int) and f["size"] >= 0):
            return f"file {rel!r} has no valid sha256 and size"
    return None


def is_commit(text: object) -> bool:
    """Whether `text` has the shape of a commit label ('{opstamp}-{12 hex}')."""
    return isinstance(text, str) and _COMMIT.fullmatch(text) is not None


@contextlib.contextmanager
def writer_locks(folder: Path, name: str, wait: float = LOCK_WAIT) -> Iterator[None]:
    """Hold the index's writer locks (Tantivy's writer lock and, for a hybrid index, dense/LOCK:
    both flock) so no commit lands while the folder is read. Waits up to `wait` seconds for a
    running writer, then raises IndexLockedError."""
    paths = [folder / WRITER_LOCK] + ([folder / DENSE / "LOCK"] if (folder / DENSE).is_dir() else [])
    fds = [fd for fd in map(_lock_fd, paths) if fd is not None]
    try:
        deadline = time.monotonic() + wait
        for fd in fds:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise IndexLockedError(name, str(folder)) from None
                    time.sleep(0.2)
        yield
    finally:
        for fd in fds:
            os.close(fd)


def _lock_fd(path: Path) -> int | None:
    """`path` opened to flock it: created when absent; opened only for reading on a folder this
    process cannot write (a read-only mount: flock needs no write access there); None when it
    is absent there (no writer ever ran on it)."""
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None


def write_atomically(path: Path, data: bytes) -> None:
    """`data` at `path` through a temporary file in the same folder, fsynced, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def file_digest(path: Path) -> tuple[str, int]:
    """(SHA-256 hex, size in bytes) of the file at `path`, read in blocks of CHUNK bytes."""
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
            size += len(block)
    return h.hexdigest(), size


def _store_object(src: Path, dest: Path, sha: str) -> None:
    """Copy `src` to `dest` (a temporary name, fsync, rename), checking it still has digest `sha`."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(src, "rb") as r, open(tmp, "wb") as w:
            while block := r.read(CHUNK):
                h.update(block)
                w.write(block)
            w.flush()
            os.fsync(w.fileno())
        if h.hexdigest() != sha:  # the writer's lock is held: only a disk fault changes a file now
            raise OSError(f"{src} changed while it was published")
        os.replace(tmp, dest)
    finally:
        tmp.unlink(missing_ok=True)


def publish(folder: Path, name: str, store: Path, *, keep: int = 3, wait: float = LOCK_WAIT,
            clock: Callable[[], float] = time.time) -> Published:
    """Write the index's current commit to `store` as a generation (module docstring).

    folder: the index folder (`IndexStore.folder`). store: the store's root folder (created).
    keep: generations kept, ≥ 1. wait: seconds to wait for a running writer. Idempotent: a
    commit published before copies nothing again, but the store's copies are read back and one
    that differs (a damaged object) is written again. Raises IndexNotFoundError,
    SchemaVersionError, IndexLockedError (a writer still ran after `wait`), OSError for the store.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1")
    if not (folder / META).is_file():
        raise IndexNotFoundError(name, str(folder))
    base = Path(store) / name
    with writer_locks(folder, name, wait):
        check_sidecar(folder, name)
        meta = (folder / META).read_bytes()
        commit = commit_label(int(orjson.loads(meta)["opstamp"]), meta)
        files: dict[str, dict[str, Any]] = {}
        new = copied = 0
        for rel in index_files(folder):
            sha, size = file_digest(folder / rel)
            files[rel] = {"sha256": sha, "size": size}
            final = Path(store) / object_path(name, sha)
            if not (final.is_file() and file_digest(final) == (sha, size)):  # a damaged copy is rewritten
                _store_object(folder / rel, final, sha)
                new, copied = new + 1, copied + size
    manifest = orjson.dumps({"format": FORMAT, "index": name, "commit": commit,
                             "opstamp": int(orjson.loads(meta)["opstamp"]), "schema_version": SCHEMA_VERSION,
                             "published": round(clock(), 3), "files": files},
                            option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2)
    latest_path = base / LATEST
    already = _latest_commit(latest_path) == commit
    write_atomically(Path(store) / manifest_path(name, commit), manifest)
    write_atomically(latest_path, orjson.dumps({"commit": commit,
                                                "manifest_sha256": hashlib.sha256(manifest).hexdigest()}))
    pruned = _prune_store(base, keep, commit)
    return Published(commit, len(files), sum(f["size"] for f in files.values()), new, copied, already, pruned)


def _latest_commit(path: Path) -> str | None:
    try:
        return str(orjson.loads(path.read_bytes())["commit"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _prune_store(base: Path, keep: int, latest: str) -> int:
    """Delete all but the newest `keep` manifests (by publish time; LATEST's always kept), then
    every object no kept manifest lists. Returns how many manifests were deleted."""
    found: list[tuple[float, Path, dict[str, Any]]] = []
    for p in (base / "generations").glob("*.json"):
        try:
            m = orjson.loads(p.read_bytes())
            found.append((float(m.get("published", 0)), p, m))
        except (OSError, ValueError):
            continue  # a foreign or damaged file: neither kept nor counted
    found.sort(key=lambda x: (x[2].get("commit") == latest, x[0]), reverse=True)
    kept, gone = found[:keep], found[keep:]
    for _, p, _m in gone:
        p.unlink(missing_ok=True)
    used = {f.get("sha256") for _, _, m in kept for f in m.get("files", {}).values() if isinstance(f, dict)}
    if gone:
        for obj in (base / "objects").glob("*/*"):
            if obj.name not in used and not obj.name.startswith("."):
                obj.unlink(missing_ok=True)
    return len(gone)
