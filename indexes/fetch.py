"""Install a published generation (`indexes.generations`) into a replica's index folder, the
way a Tantivy commit lands: new immutable files first, the commit point (meta.json) last, by
rename, so running readers pick it up through their usual reload (`KnowledgeIndex.
maybe_reload`, within 0.5 s) and never see a torn commit.

Rationale: docs/design-notes.md, "indexes/fetch.py".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from .errors import GenerationError
from .generations import (
    CHUNK,
    DENSE,
    FETCH_RECORD,
    LATEST,
    META,
    META_LOCK,
    NOT_PUBLISHED,
    file_digest,
    is_commit,
    manifest_path,
    manifest_problem,
    object_path,
    write_atomically,
    writer_locks,
)
from .stats import read_commit
from .types import GenerationSource, SourceMissing

__all__ = ["Fetched", "FolderSource", "fetch", "fetch_record"]

WORK = ".fetch"  # under the indexes root: staging folders and fetch locks (a dot folder is never an index)
MAX_LATEST = 64 << 10
MAX_MANIFEST = 64 << 20
DENSE_CURRENT = f"{DENSE}/CURRENT"


@dataclass(frozen=True, slots=True)
class Fetched:
    """What `fetch` did. commit: the commit the live folder holds now; previous: the one it held
    before (None: no index yet). downloaded / downloaded_bytes: files read from the store;
    reused: files the folder held already. already: nothing to do (previous == commit, and every
    file the last fetch installed is still as it left it)."""

    commit: str
    previous: str | None
    downloaded: int
    downloaded_bytes: int
    reused: int
    already: bool


class FolderSource:
    """A store that is a folder on this machine (a shared volume, a synced bucket)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def describe(self) -> str:
        return str(self.root)

    def read(self, path: str, write: Callable[[bytes], None]) -> None:
        """Stream `root/path` into `write`. Raises SourceMissing, OSError."""
        try:
            f = open(self.root / path, "rb")  # noqa: SIM115  # closed below
        except FileNotFoundError:
            raise SourceMissing(path) from None
        with f:
            while block := f.read(CHUNK):
                write(block)


def fetch_record(folder: Path) -> dict[str, Any]:
    """The record the last fetch left in `folder` ({} when none): {"commit", "source",
    "fetched_at" (unix s), "files": {path: [sha256, size, mtime_ns, inode]}}."""
    try:
        rec = orjson.loads((Path(folder) / FETCH_RECORD).read_bytes())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def fetch(source: GenerationSource, root: Path, name: str, *, clock: Callable[[], float] = time.time) -> Fetched:
    """Install the LATEST generation of index `name` from `source` into `root/name` (module
    docstring). root: `indexes.dir`; name: a valid index name (`IndexStore.folder`).

    Raises GenerationError (nothing published, a checksum, size or read failure, a damaged
    manifest or one of another schema version, another fetch running: the folder is left as
    it was), IndexLockedError (a local writer holds the index), OSError for the local disk.
    """
    folder = Path(root) / name
    work = Path(root) / WORK
    work.mkdir(parents=True, exist_ok=True)
    previous = read_commit(folder)[1]
    serving = f"; this replica keeps serving commit {previous}" if previous else "; no commit of it here yet"
    where = source.describe()

    def refuse(what: str) -> GenerationError:
        return GenerationError(name, f"index {name!r}: {what} (store {where}){serving}")

    with _exclusive(work / f"{name}.lock", refuse):
        latest = _small_json(source, f"{name}/{LATEST}", MAX_LATEST, refuse)
        commit, manifest_sha = latest.get("commit"), latest.get("manifest_sha256")
        if not is_commit(commit) or not isinstance(manifest_sha, str):
            raise refuse(f"{LATEST} names no commit")
        assert isinstance(commit, str)
        if commit == previous and _intact(folder, commit):
            return Fetched(commit, previous, 0, 0, 0, True)
        raw = _read_all(source, manifest_path(name, commit), MAX_MANIFEST, refuse)
        if hashlib.sha256(raw).hexdigest() != manifest_sha:
            raise refuse(f"the manifest of commit {commit} does not have the checksum {LATEST} states: refused")
        try:
            manifest = orjson.loads(raw)
        except ValueError:
            raise refuse(f"the manifest of commit {commit} is not JSON") from None
        problem = manifest_problem(manifest, name, commit)
        if problem is not None:
            raise refuse(f"the manifest of commit {commit} {problem}")
        files: dict[str, dict[str, Any]] = manifest["files"]
        staging = work / name
        shutil.rmtree(staging, ignore_errors=True)  # what an interrupted fetch left
        staging.mkdir()
        try:
            record = fetch_record(folder).get("files", {})
            staged: list[str] = []
            got = 0
            for rel, f in sorted(files.items()):
                if _holds(folder / rel, f, record.get(rel)):
                    continue
                _download(source, name, rel, f, staging / rel, refuse)
                staged.append(rel)
                got += f["size"]
            folder.mkdir(parents=True, exist_ok=True)
            with writer_locks(folder, name, wait=0):
                old_vectors = _dense_folder(folder)
                _install(folder, staging, staged)
                _write_record(folder, commit, where, files, clock())
                _prune(folder, set(files), old_vectors)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return Fetched(commit, previous, len(staged), got, len(files) - len(staged), False)


@contextlib.contextmanager
def _exclusive(path: Path, refuse: Callable[[str], GenerationError]) -> Iterator[None]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise refuse("another fetch of this index is running") from None
        yield
    finally:
        os.close(fd)


def _read_all(source: GenerationSource, path: str, limit: int, refuse: Callable[[str], GenerationError]) -> bytes:
    parts: list[bytes] = []
    size = 0

    def write(block: bytes) -> None:
        nonlocal size
        size += len(block)
        if size > limit:
            raise refuse(f"{path} is larger than {limit} bytes")
        parts.append(block)

    try:
        source.read(path, write)
    except SourceMissing:
        raise refuse(f"nothing published: {path} is missing" if path.endswith(LATEST) else f"{path} is missing") \
            from None
    except OSError as exc:
        raise refuse(f"{path} could not be read ({exc})") from None
    return b"".join(parts)


def _small_json(source: GenerationSource, path: str, limit: int,
                refuse: Callable[[str], GenerationError]) -> dict[str, Any]:
    try:
        value = orjson.loads(_read_all(source, path, limit, refuse))
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise refuse(f"{path} is not a JSON object")
    return value


def _intact(folder: Path, commit: str) -> bool:
    """False when the fetch record of `commit` lists a file that is gone or changed since (then
    the same commit is fetched again, which repairs it). True without a record of it: a folder
    built here, or shipped otherwise, is not fetch's to judge."""
    rec = fetch_record(folder)
    if rec.get("commit") != commit or not isinstance(rec.get("files"), dict):
        return True
    for rel, (_sha, size, mtime_ns, ino) in rec["files"].items():
        try:
            st = (folder / rel).stat()
        except OSError:
            return False
        if (st.st_size, st.st_mtime_ns, st.st_ino) != (size, mtime_ns, ino):
            return False
    return True


def _holds(live: Path, f: dict[str, Any], recorded: Any) -> bool:
    """Whether the live file already has the manifest's content: same size, and the SHA-256
    recorded when fetch installed it (while size, mtime and inode are unchanged) or read now."""
    try:
        st = live.stat()
    except OSError:
        return False
    if not live.is_file() or st.st_size != f["size"]:
        return False
    if isinstance(recorded, list) and recorded == [f["sha256"], st.st_size, st.st_mtime_ns, st.st_ino]:
        return True
    return bool(file_digest(live)[0] == f["sha256"])


def _download(source: GenerationSource, name: str, rel: str, f: dict[str, Any], dest: Path,
              refuse: Callable[[str], GenerationError]) -> None:
    """Stream the object of `rel` into `dest`, checking its size as it comes and its SHA-256
    at the end; fsynced. Raises GenerationError on any difference or read failure."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    obj = object_path(name, f["sha256"])
    with open(dest, "wb") as out:
        def write(block: bytes) -> None:
            nonlocal size
            size += len(block)
            if size > f["size"]:
                raise refuse(f"{rel} ({obj}) is longer than the {f['size']} bytes its manifest states: refused")
            h.update(block)
            out.write(block)

        try:
            source.read(obj, write)
        except SourceMissing:
            raise refuse(f"{rel} is missing from the store ({obj}); publish again") from None
        except OSError as exc:
            raise refuse(f"{rel} ({obj}) could not be read ({exc})") from None
        if size != f["size"] or h.hexdigest() != f["sha256"]:
            raise refuse(f"{rel} ({obj}) does not match its checksum ({size} bytes, sha256 {h.hexdigest()[:12]}…, "
                         f"expected {f['size']} bytes, {f['sha256'][:12]}…): refused")
        out.flush()
        os.fsync(out.fileno())


def _dense_folder(folder: Path) -> str | None:
    """The vectors folder dense/CURRENT names now (kept through the prune), or None."""
    try:
        return str(orjson.loads((folder / DENSE_CURRENT).read_bytes())["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _install(folder: Path, staging: Path, staged: list[str]) -> None:
    """Rename the staged files into `folder`: new ones, then replaced ones, then dense/CURRENT,
    then meta.json (the commit point); fsync every folder touched."""
    order = sorted(staged, key=lambda rel: (rel == META, rel == DENSE_CURRENT, (folder / rel).exists(), rel))
    touched = {folder}
    for rel in order:
        dest = folder / rel
        if rel == META:
            for d in touched:
                _fsync_dir(d)  # everything the new meta.json names is durable before it is
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / rel, dest)
        touched.add(dest.parent)
    _fsync_dir(folder)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_record(folder: Path, commit: str, source: str, files: dict[str, dict[str, Any]], now: float) -> None:
    stats: dict[str, list[Any]] = {}
    for rel, f in files.items():
        with contextlib.suppress(OSError):
            st = (folder / rel).stat()
            stats[rel] = [f["sha256"], st.st_size, st.st_mtime_ns, st.st_ino]
    write_atomically(folder / FETCH_RECORD, orjson.dumps({"commit": commit, "source": source,
                                                          "fetched_at": round(now, 3), "files": stats}))


def _prune(folder: Path, keep: set[str], old_vectors: str | None) -> None:
    """Delete the files of `folder` the new commit does not list (but locks, the fetch record
    and the previous vectors folder), holding Tantivy's meta lock; then empty folders."""
    kept_dir = f"{DENSE}/{old_vectors}/" if old_vectors else None
    fd = os.open(folder / META_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # blocks only while a reader opens a commit's segments
        for p in sorted(folder.rglob("*"), reverse=True):
            rel = p.relative_to(folder).as_posix()
            if p.is_dir() and not p.is_symlink():
                if rel != DENSE:
                    with contextlib.suppress(OSError):
                        p.rmdir()  # only when empty
                continue
            if rel in keep or p.name in NOT_PUBLISHED or (kept_dir and rel.startswith(kept_dir)):
                continue
            with contextlib.suppress(OSError):  # the commit is installed: a leftover is no failure
                p.unlink()
    finally:
        os.close(fd)
