"""Read one file's bytes in a child process held to memory and CPU limits.

Rationale: docs/design-notes.md, "indexes/ingest/confine.py".
"""

from __future__ import annotations

import atexit
import os
import pickle
import queue
import resource
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..types import Document, IngestError, IngestWarning
from .bounds import DEFAULT_READ_BOUNDS, ReadBounds

__all__ = ["READERS", "confined_read", "shutdown"]

READERS = 2
"""Child processes at most at once per calling process (each may take bounds.memory_bytes)."""
WALL_FACTOR = 3
"""A child is killed after WALL_FACTOR x cpu_seconds + START_SECONDS of wall time on one file
(a parse blocked on something other than CPU)."""
START_SECONDS = 30.0
KEEP_GROWTH = 256 * 1024 * 1024
"""A child whose resident memory grew by more than this over one file is replaced."""
_HEADER = struct.Struct(">Q")
_CHILD = "from indexes.ingest.confine import _main; _main()"
_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the `indexes` package
_OUT_OF_MEMORY = ("MemoryError", "Memory allocation failed")
ReadItem = Document | IngestError | IngestWarning


@dataclass(frozen=True, slots=True)
class _Job:
    data: bytes
    rel_path: str
    media_type: str | None
    max_document_bytes: int
    bounds: ReadBounds


class _ChildGone(Exception):
    """The child process ended or stopped answering; `cpu` when it was for CPU time."""

    def __init__(self, reason: str, cpu: bool = False) -> None:
        super().__init__(reason)
        self.reason, self.cpu = reason, cpu


class _Child:
    """One reader process and its two pipes."""

    def __init__(self) -> None:
        env = dict(os.environ)  # the child imports this very package, installed or not
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen([sys.executable, "-c", _CHILD], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, close_fds=True, env=env)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def read(self, job: _Job) -> tuple[str, list[ReadItem]]:
        """(status, items) of `job`: status 'ok', 'memory' or 'retire' (ok, then replace the
        child). Raises _ChildGone."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        frame = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.proc.stdin.write(_HEADER.pack(len(frame)) + frame)
            self.proc.stdin.flush()
        except OSError:
            raise self._gone() from None
        deadline = time.monotonic() + WALL_FACTOR * job.bounds.cpu_seconds + START_SECONDS
        fd = self.proc.stdout.fileno()
        size = _HEADER.unpack(self._exactly(fd, _HEADER.size, deadline))[0]
        status, items = pickle.loads(self._exactly(fd, size, deadline))
        return str(status), list(items)

    def _exactly(self, fd: int, n: int, deadline: float) -> bytes:
        parts: list[bytes] = []
        while n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                self.kill()
                raise _ChildGone("it outlived its time", cpu=True)
            chunk = os.read(fd, min(n, 1 << 20))
            if not chunk:
                raise self._gone()
            parts.append(chunk)
            n -= len(chunk)
        return b"".join(parts)

    def _gone(self) -> _ChildGone:
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if code == -signal.SIGXCPU or code == -signal.SIGKILL:
            return _ChildGone("its CPU time ran out", cpu=True)
        return _ChildGone(f"the reader process ended (exit status {code})")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def close(self) -> None:
        """End the child: its stdin closes, it exits; killed when it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


class _Pool:
    """At most READERS children of this process; idle ones wait in a queue."""

    def __init__(self) -> None:
        self.idle: queue.LifoQueue[_Child] = queue.LifoQueue()
        self.slots = threading.BoundedSemaphore(READERS)
        self.lock = threading.Lock()
        self.pid = os.getpid()

    def read(self, job: _Job) -> list[ReadItem]:
        with self.slots:
            try:
                child = self.idle.get_nowait()
            except queue.Empty:
                child = None
            try:
                if child is None or not child.alive():
                    child = _Child()
                status, items = child.read(job)
            except _ChildGone as exc:
                if child is not None:
                    child.kill()
                return [_refused(job, exc)]
            except OSError as exc:  # the child cannot be started
                if child is not None:
                    child.kill()
                return [IngestError(job.rel_path, f"cannot start a reader process: {exc.strerror or exc}",
                                    kind="unreadable")]
            if status == "ok":
                self.idle.put(child)
            else:
                child.close()
            if status == "memory":
                return [_memory(job)]
            return items

    def close(self) -> None:
        while True:
            try:
                self.idle.get_nowait().close()
            except queue.Empty:
                return


def _memory(job: _Job) -> IngestError:
    return IngestError(job.rel_path, f"reading it needs over {job.bounds.memory_bytes} bytes of memory "
                                     "(indexes.reader_memory_bytes): refused", kind="too_large")


def _refused(job: _Job, exc: _ChildGone) -> IngestError:
    if exc.cpu:
        return IngestError(job.rel_path, f"reading it takes over {job.bounds.cpu_seconds} s of CPU "
                                         f"(indexes.reader_cpu_seconds; {exc.reason}): refused", kind="too_large")
    return IngestError(job.rel_path, f"cannot be read: {exc.reason}", kind="corrupt")


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def confined_read(data: bytes, rel_path: str, *, media_type: str | None = None, max_document_bytes: int,
                  bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> list[ReadItem]:
    """The items `read_bytes(data, rel_path, media_type=..., max_document_bytes=..., bounds=...)`
    yields, read in a child process within `bounds` (module docstring). Blocking: call it off
    an event loop. Never raises for a bad file."""
    global _pool
    with _pool_lock:
        if _pool is None or _pool.pid != os.getpid():  # a forked process starts its own
            _pool = _Pool()
        pool = _pool
    return pool.read(_Job(data, rel_path, media_type, max_document_bytes, bounds))


def shutdown() -> None:
    """End this process's idle reader processes (at exit; a later read starts new ones)."""
    with _pool_lock:
        if _pool is not None and _pool.pid == os.getpid():
            _pool.close()


atexit.register(shutdown)


# ---- the child --------------------------------------------------------------------------------

def _statm() -> tuple[int, int]:
    """(virtual size, resident size) of this process in bytes."""
    with open("/proc/self/statm") as f:
        size, resident = (int(v) for v in f.read().split()[:2])
    page = os.sysconf("SC_PAGE_SIZE")
    return size * page, resident * page


def _cpu_used() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _limit(kind: int, soft: int) -> None:
    hard = resource.getrlimit(kind)[1]
    resource.setrlimit(kind, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def _unlimit(kind: int) -> None:
    resource.setrlimit(kind, (resource.getrlimit(kind)[1], resource.getrlimit(kind)[1]))


def _one(job: _Job) -> tuple[str, list[Any]]:
    from .formats import read_bytes

    size, resident = _statm()
    _limit(resource.RLIMIT_CPU, int(_cpu_used()) + 1 + job.bounds.cpu_seconds)
    _limit(resource.RLIMIT_AS, size + job.bounds.memory_bytes)
    try:
        items = list(read_bytes(job.data, job.rel_path, media_type=job.media_type,
                                max_document_bytes=job.max_document_bytes, bounds=job.bounds))
        status = "ok"
    except MemoryError:
        items, status = [], "memory"
    finally:
        _unlimit(resource.RLIMIT_AS)
        _unlimit(resource.RLIMIT_CPU)
    if status == "ok" and any(isinstance(i, IngestError) and any(m in i.reason for m in _OUT_OF_MEMORY)
                              for i in items):  # a reader that refused the file for a MemoryError it caught
        items, status = [], "memory"
    if status == "ok" and _statm()[1] - resident > KEEP_GROWTH:
        status = "retire"
    return status, items


def _main() -> None:
    """The child's loop: a job in on stdin, (status, items) out on the stdout it was given;
    its own fd 1 goes to stderr, so nothing a library prints reaches the pipe."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    import indexes.ingest.formats  # noqa: F401  # imported before the first limit is set

    while True:
        head = inp.read(_HEADER.size)
        if len(head) < _HEADER.size:
            return
        job = pickle.loads(inp.read(_HEADER.unpack(head)[0]))
        status, items = _one(job)
        frame = pickle.dumps((status, items), protocol=pickle.HIGHEST_PROTOCOL)
        out.write(_HEADER.pack(len(frame)) + frame)
        out.flush()
        if status != "ok":
            return

