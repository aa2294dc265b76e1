"""Start and stop the servers under test: `kbgate serve` and the floor, on free ports.

`write_config` writes a gateway TOML for one index (tenant `bench`, route bench/bench,
Redis replay store with a per-run key prefix, tolerance 120 s so benchmark nonces expire
soon). `Server` runs a command, waits for GET /readyz → 200, lists the hypercorn worker
processes, reads their memory, and stops with SIGTERM (hypercorn's graceful shutdown).
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import httpx
import orjson

from bench.procfs import children, memory_kib

__all__ = ["Server", "free_port", "write_config", "sample_answer"]

TENANT = "bench"
CALLBACK_PATH = f"/volcengine/{TENANT}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(workdir: Path, indexes_dir: Path, index: str, port: int, workers: int,
                 redis_url: str) -> tuple[Path, Path]:
    """(config path, secret file) for serving `index` on 127.0.0.1:port."""
    workdir.mkdir(parents=True, exist_ok=True)
    secret_file = workdir / "bench.secret"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(32))
        secret_file.chmod(0o600)
    cfg = workdir / f"gateway-{index}.toml"
    cfg.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\nworkers = {workers}\n'
        f'[replay]\nredis_url = {json.dumps(redis_url)}\ntolerance_seconds = 120\n'
        f'key_prefix = "kbgate-bench-{os.getpid()}"\n'
        f'[indexes]\ndir = {json.dumps(str(indexes_dir.resolve()))}\n'
        f'[log]\nlevel = "info"\n'
        f'[tenants.{TENANT}]\n[[tenants.{TENANT}.secrets]]\nid = "bench"\n'
        f'value_file = {json.dumps(str(secret_file.resolve()))}\n'
        f'[[tenants.{TENANT}.routes]]\nfirst_level_id = "bench"\nsecond_level_id = "bench"\n'
        f'index = "{index}"\n'
    )
    return cfg, secret_file


class Server:
    """A server process (kbgate serve or the floor); use as a context manager."""

    def __init__(self, argv: list[str], port: int, log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.port = port
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        self._log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=self._log, env=self.env)
        self._wait_ready()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def _wait_ready(self, seconds: float = 60.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.argv[2:4]} exited with {self.proc.returncode}; see {self.log_path}")
            try:
                if httpx.get(f"{self.base}/readyz", timeout=2.0).status_code == 200 and \
                        len(self.workers()) >= 1:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"server not ready within {seconds} s; see {self.log_path}")

    def workers(self) -> list[int]:
        """Hypercorn worker pids: children of the main process spawned by multiprocessing
        (the resource tracker, also a child, is left out)."""
        assert self.proc is not None
        out = []
        for pid in children(self.proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if b"resource_tracker" not in cmd:
                out.append(pid)
        return out or [self.proc.pid]

    def memory(self) -> list[dict[str, int]]:
        """[{'pid', 'VmHWM', 'VmRSS'} in KiB] of each worker."""
        return [{"pid": pid, **memory_kib(pid)} for pid in self.workers()]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        if self.proc is not None and hasattr(self, "_log"):
            self._log.close()


def gateway_argv(config: Path, workers: int) -> list[str]:
    return [sys.executable, "-m", "gateway.cli", "serve", "--config", str(config), "--workers", str(workers)]


def floor_argv(config: Path, port: int, workers: int) -> list[str]:
    return [sys.executable, "-m", "bench.floor", "--config", str(config), "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers)]


def sample_answer(base: str, secret: str, query: str) -> bytes:
    """One real signed callback's answer body (Ret must be 0). Raises RuntimeError."""
    from gateway.volcengine.signing import sign_headers

    body = orjson.dumps({"FirstLevelId": "bench", "SecondLevelId": "bench", "Query": query, "Limit": 5})
    r = httpx.post(f"{base}{CALLBACK_PATH}", content=body, timeout=10.0,
                   headers=sign_headers(secret, body, int(time.time())))
    if orjson.loads(r.content).get("Ret") != 0:
        raise RuntimeError(f"sample callback failed: {r.status_code} {r.text[:200]}")
    return r.content
