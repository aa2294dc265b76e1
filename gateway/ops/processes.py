"""Child processes on free loopback ports: started, waited for until they answer, stopped.

The one place for `kbgate eval`'s servers, the test harness (tests/support/harness.py) and
bench/'s programs. Rationale: docs/design-notes.md, "tests/support/harness.py".
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import orjson

LISTENING = "Running on http"  # what each hypercorn worker logs once it serves


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kbgate_argv(config: Path, *, bind: str | None = None, workers: int | None = None) -> list[str]:
    """`kbgate serve --config CONFIG [--bind HOST:PORT] [--workers N]`, run by this Python."""
    argv = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config)]
    if bind is not None:
        argv += ["--bind", bind]
    if workers is not None:
        argv += ["--workers", str(workers)]
    return argv


def children(pid: int) -> list[int]:
    """Direct child process ids of `pid` (Linux: /proc/<pid>/task/*/children)."""
    out: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.update(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return sorted(out)


class Server:
    """One server process on 127.0.0.1:`port`; a context manager (start on enter, stop on exit).

    argv: the command. log_path: where its stdout and stderr go (when None, a temporary file
    that `stop` removes, keeping its text for `logs()`).
    env: added to (or, with a None value, removed from) this process's environment; the
    multiprocess metrics folder of the test process is never inherited. workers: how many
    listening workers make it ready. ready_timeout: seconds to wait for readiness.
    """

    def __init__(self, argv: Sequence[str], port: int, log_path: Path | None = None, *,
                 env: Mapping[str, str | None] | None = None, cwd: Path | None = None, workers: int = 1,
                 ready_timeout: float = 60.0) -> None:
        self.argv = list(argv)
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.own_log = log_path is None
        if log_path is None:
            fd, name = tempfile.mkstemp(prefix="kbgate-serve-", suffix=".log")
            os.close(fd)
            log_path = Path(name)
        self.log_path = log_path
        self.final_log: str | None = None  # the text of our own log, once stop removed it
        merged = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        for k, v in (env or {}).items():
            if v is None:
                merged.pop(k, None)
            else:
                merged[k] = v
        self.env = merged
        self.cwd = cwd
        self.expected_workers = workers
        self.ready_timeout = ready_timeout
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return self.base

    def start(self) -> Server:
        """Start the command and wait until it is ready. Raises RuntimeError (with the log) when
        it exits first or is not ready in time; it is stopped then."""
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                         cwd=self.cwd, start_new_session=True)
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"{self.argv[2:5]} exited with {self.proc.returncode}:\n{self.logs()[-4000:]}")
            if self.logs().count(LISTENING) >= self.expected_workers and self._ready():
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{self.argv[2:5]} not ready within {self.ready_timeout} s:\n{self.logs()[-4000:]}")

    def _ready(self) -> bool:
        return answers(f"{self.base}/readyz")

    def workers(self) -> list[int]:
        """Worker process ids (the server's children but multiprocessing's resource tracker and a
        document reader, indexes.ingest.confine);
        the server's own pid when it has no workers of its own."""
        assert self.proc is not None
        out = []
        for pid in children(self.proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" not in cmd and b"indexes.ingest.confine" not in cmd:  # nor a reader
                out.append(pid)
        return out or [self.proc.pid]

    def logs(self) -> str:
        """Everything the server wrote so far (stdout and stderr)."""
        if self.final_log is not None:
            return self.final_log
        try:
            return self.log_path.read_text("utf-8", "replace")
        except OSError:
            return ""

    def log_records(self) -> list[dict[str, Any]]:
        """The JSON log lines written so far, parsed (other lines are skipped)."""
        out = []
        for line in self.logs().splitlines():
            if line.startswith("{"):
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    pass
        return out

    def wait_log(self, msg: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until `count` JSON log lines with msg == `msg` were written; return them.
        Raises AssertionError with the log (but the per-callback access lines) otherwise."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in self.log_records() if r.get("msg") == msg]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        other = [line for line in self.logs().splitlines() if '"kbgate.access"' not in line]
        raise AssertionError(f"{count} x {msg!r} not logged; all but access lines:\n" + "\n".join(other[-40:]))

    def sighup(self) -> None:
        """Ask the server to reload its config (kbgate's master turns SIGHUP into a reload)."""
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGHUP)

    def stop(self, grace: float = 20.0) -> int | None:
        """SIGTERM, wait up to `grace` seconds, then SIGKILL the process group. Returns the exit
        code. A log file of our own is removed then (its text stays readable through `logs()`)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self.own_log and self.final_log is None:
            self.final_log = self.logs()
            self.log_path.unlink(missing_ok=True)
        return self.proc.returncode

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def stop(proc: subprocess.Popen[bytes], grace: float = 15.0) -> int | None:
    """SIGTERM `proc`, wait up to `grace` seconds, then SIGKILL it; its exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)
    return proc.returncode


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen[bytes], seconds: float, what: str) -> None:
    """Poll `ready()` every 0.1 s until it is true. Raises RuntimeError naming `what` when `proc`
    exits first (with its code) or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with code {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} was not ready within {seconds:g} s")


def answers(url: str, timeout: float = 2.0) -> bool:
    """True when a GET of `url` answers 200 within `timeout` seconds."""
    try:
        return httpx.get(url, timeout=timeout).status_code == 200
    except httpx.HTTPError:
        return False


def listening(port: int) -> bool:
    """True when something accepts TCP connections on 127.0.0.1:`port`."""
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    """Wait until `base`/readyz answers 200 (a server we started as `proc`); raises RuntimeError
    when it exits first or `seconds` pass."""
    wait_until(lambda: answers(f"{base}/readyz"), proc, seconds, "kbgate serve")


def kbgate(*args: str, env: Mapping[str, str] | None = None, input: str | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The real `kbgate` CLI run by this Python from the repository root, with `env` added to
    this process's environment; its output captured as text."""
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout, input=input,
                          cwd=Path(__file__).resolve().parents[2])
