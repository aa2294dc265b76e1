"""A real `kbgate serve` on a free loopback port, for end-to-end tests.

`write_setup` builds a small Tantivy index and a TOML config with two tenants
(acme: enforce, two keys; beta: report mode); `LiveServer` runs the CLI exactly as an
operator would and keeps its stderr (the JSON log lines) for the test to read.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.ops.admin.auth import token_digest
from gateway.volcengine.signing import sign_headers
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.conftest import free_port

SECRET_ACME = "acme-secret-Qz8vT1mK3pW6"
SECRET_ACME_OLD = "acme-oldsecret-Lr4nB7xY2c"
SECRET_BETA = "beta-secret-Hd5sJ9gF0aE2"
ADMIN_TOKEN = "admin-token-0123456789abcdefXYZ"
SECRETS = (SECRET_ACME, SECRET_ACME_OLD, SECRET_BETA, ADMIN_TOKEN)
ENV = {"ACME_SECRET": SECRET_ACME, "ACME_OLD": SECRET_ACME_OLD, "BETA_SECRET": SECRET_BETA}

DOCS = [
    Document("kb-1", "密钥轮换", (Section("", "新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。"),)),
    Document("kb-2", "软件安装指南", (Section("", "下载软件安装包后，执行安装程序并依照提示完成设置。"),)),
    Document("kb-3", "重放攻击防护", (Section("", "每个随机串在时间窗口内只能使用一次，重复投递会被拒绝。"),)),
]


def write_setup(tmp: Path, *, redis_url: str | None = None, key_prefix: str = "kbgate", workers: int = 1,
                admin: bool = True, show_queries: bool = False, log_level: str = "info") -> Path:
    """Index + config under `tmp`; returns the config path."""
    IndexStore(tmp / "indexes").create_or_open_for_write("docs").ingest(DOCS, progress=False)
    replay = f'redis_url = "{redis_url}"\nkey_prefix = "{key_prefix}"\n' if redis_url else ""
    admin_t = (f'[admin]\ntoken_sha256 = "{token_digest(ADMIN_TOKEN)}"\n'
               f'show_queries = {"true" if show_queries else "false"}\n') if admin else ""
    text = f"""
[server]
workers = {workers}
[replay]
{replay}
[indexes]
dir = "indexes"
[log]
level = "{log_level}"
{admin_t}
[tenants.acme]
path = "/volcengine/acme"
[[tenants.acme.secrets]]
id = "acme-2026-10"
value_env = "ACME_OLD"
[[tenants.acme.secrets]]
id = "acme-2026-11"
value_env = "ACME_SECRET"
[[tenants.acme.routes]]
first_level_id = "tech"
second_level_id = "software"
index = "docs"
[tenants.beta]
path = "/volcengine/beta"
verify = "report"
[[tenants.beta.secrets]]
id = "beta-1"
value_env = "BETA_SECRET"
[[tenants.beta.routes]]
first_level_id = "产品"
second_level_id = "文档"
index = "docs"
"""
    path = tmp / "gateway.toml"
    path.write_text(text, encoding="utf-8")
    return path


def body(first: str = "tech", second: str = "software", query: str = "密钥轮换", limit: int = 3) -> bytes:
    return orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": limit})


def signed(secret: str, raw: bytes, ts: int | None = None) -> dict[str, str]:
    h = sign_headers(secret, raw, int(time.time()) if ts is None else ts)
    h["content-type"] = "application/json"
    return h


@dataclass
class LiveServer:
    """`kbgate serve --config CONFIG --bind 127.0.0.1:PORT` in a subprocess."""

    config: Path
    workers: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> LiveServer:
        self.port = free_port()
        self.log_path = self.config.parent / f"serve-{self.port}.log"
        cmd = [sys.executable, "-m", "gateway.cli", "serve", "--config", str(self.config),
               "--bind", f"127.0.0.1:{self.port}"]
        if self.workers:
            cmd += ["--workers", str(self.workers)]
        env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
        env.update({**ENV, **self.env})
        with open(self.log_path, "wb") as errlog:
            self.proc = subprocess.Popen(cmd, stdout=errlog, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"kbgate serve exited {self.proc.returncode}: {self.logs()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=0.5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"kbgate serve did not answer /healthz: {self.logs()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)

    def logs(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path and self.log_path.exists() else ""

    def __enter__(self) -> LiveServer:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
