"""A real `kbgate serve` in a subprocess for end-to-end tests (free port, Redis, N workers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.volcengine.signing import sign_headers
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.conftest import ROOT, free_port

DOCS = [
    Document("kb-1", "密钥轮换", (Section("", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。"),)),
    Document("kb-2", "重放攻击防护", (Section("", "每个随机串在时间窗口内只能使用一次，重复投递会被拒绝。"),)),
]


def build_index(root: Path) -> Path:
    """An index 'docs' under root/indexes; returns root/indexes."""
    IndexStore(root / "indexes").create_or_open_for_write("docs").ingest(DOCS, progress=False)
    return root / "indexes"


def config_text(*, port: int, redis_url: str, prefix: str, workers: int = 2, verify: str = "enforce",
                secrets: list[tuple[str, str]] | None = None, routes: list[tuple[str, str]] | None = None,
                extra: str = "") -> str:
    """A gateway.toml for tenant 'acme': secrets are (id, value_file) pairs, routes (first, second)."""
    lines = [
        "# kbgate end-to-end test config",
        "[server]", f'bind = "127.0.0.1:{port}"', f"workers = {workers}", "graceful_timeout = 5",
        "[replay]", f'redis_url = "{redis_url}"', f'key_prefix = "{prefix}"',
        "[indexes]", 'dir = "indexes"',
        "[tenants.acme]", 'path = "/volcengine/acme"', f'verify = "{verify}"',
    ]
    for kid, vf in secrets or []:
        lines += ["[[tenants.acme.secrets]]", f'id = "{kid}"', f'value_file = "{vf}"']
    for first, second in routes or [("tech", "software")]:
        lines += ["[[tenants.acme.routes]]", f'first_level_id = "{first}"', f'second_level_id = "{second}"',
                  'index = "docs"']
    return "\n".join(lines) + "\n" + extra


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, "utf-8")
    os.replace(tmp, path)


class Server:
    """A running `kbgate serve`: base URL, its process, and its captured stderr lines."""

    def __init__(self, proc: subprocess.Popen[bytes], base: str) -> None:
        self.proc = proc
        self.base = base
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def log_records(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            if line.startswith("{"):
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    pass
        return out

    def wait_log(self, msg: str, count: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Wait until `count` JSON log lines with msg == `msg` were written; return them."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [r for r in self.log_records() if r.get("msg") == msg]
            if len(found) >= count:
                return found
            time.sleep(0.05)
        other = [line for line in self.lines if '"kbgate.access"' not in line]
        raise AssertionError(f"{count} × {msg!r} not logged; {len(self.lines)} lines, all but access lines:\n"
                             + "\n".join(other[-40:]))

    def sighup(self) -> None:
        os.kill(self.proc.pid, signal.SIGHUP)


@contextmanager
def running(config_path: Path, port: int, env: dict[str, str] | None = None, workers: int = 2) -> Iterator[Server]:
    """Start `kbgate serve --config config_path`, wait until every worker listens and /readyz
    answers 200, stop it (SIGTERM) afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(config_path)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, **(env or {})})
    server = Server(proc, f"http://127.0.0.1:{port}")
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise AssertionError("kbgate serve exited:\n" + "\n".join(server.lines))
            try:
                listening = sum("Running on http" in line for line in list(server.lines))
                if listening >= workers and httpx.get(server.base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError("kbgate serve not ready:\n" + "\n".join(server.lines))
            time.sleep(0.1)
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def body(first: str = "tech", second: str = "software", query: str = "密钥轮换") -> bytes:
    return orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": 3})


def post(client: httpx.Client, base: str, secret: str | None, *, first: str = "tech", second: str = "software",
         query: str = "密钥轮换") -> httpx.Response:
    """POST one callback to tenant acme, signed with `secret` now (unsigned when None)."""
    b = body(first, second, query)
    headers = sign_headers(secret, b, int(time.time())) if secret else {"Content-Type": "application/json"}
    return client.post(base + "/volcengine/acme", content=b, headers=headers)


def ret(r: httpx.Response) -> int:
    return int(orjson.loads(r.content)["Ret"])


__all__ = ["build_index", "config_text", "free_port", "running", "post", "ret", "write_atomic", "Server"]
