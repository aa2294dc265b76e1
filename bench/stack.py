"""What the corpus phases serve from: a throwaway Redis and one gateway config for many routes.

Rationale: docs/design-notes.md, "bench/stack.py".
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import redis

from gateway.ops.processes import free_port, kbgate_argv

__all__ = ["CALLBACK_PATH", "LEXICAL", "CorpusConfig", "dense_lines", "floor_argv", "gateway_argv",
           "lexical_keyword", "throwaway_redis", "write_config", "write_routes_config"]

TENANT = "bench"
FIRST_LEVEL_ID = "bench"
CALLBACK_PATH = f"/volcengine/{TENANT}"


def gateway_argv(config: Path, workers: int) -> list[str]:
    """`kbgate serve --config CONFIG --workers N` (the servers run under tests/support/harness.py)."""
    return kbgate_argv(config, workers=workers)


def floor_argv(config: Path, port: int, workers: int) -> list[str]:
    """The floor (bench.floor) on the gateway's hypercorn settings from `config`."""
    return [sys.executable, "-m", "bench.floor", "--config", str(config), "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers)]


def write_config(workdir: Path, indexes_dir: Path, index: str, port: int, workers: int,
                 redis_url: str, dense: str = "none") -> tuple[Path, Path]:
    """(config path, secret file) for serving `index` on 127.0.0.1:port: tenant `bench`, route
    bench/bench, Redis replay store with a per-run key prefix, tolerance 120 s so benchmark
    nonces expire soon, the answer cache off (every callback searched: the cold path), and the
    index's path named: dense "none" (lexical) or an embedded model (hybrid)."""
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
        + "".join(line + "\n" for line in dense_lines({index: dense}))
        + '[search]\nanswer_cache_entries = 0\n'
        f'[log]\nlevel = "info"\n'
        f'[tenants.{TENANT}]\n[[tenants.{TENANT}.secrets]]\nid = "bench"\n'
        f'value_file = {json.dumps(str(secret_file.resolve()))}\n'
        f'[[tenants.{TENANT}.routes]]\nfirst_level_id = "bench"\nsecond_level_id = "bench"\n'
        f'index = "{index}"\n'
    )
    return cfg, secret_file


def _answers(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_timeout=0.5).ping())
    except (redis.RedisError, OSError):
        return False


@contextlib.contextmanager
def throwaway_redis(prefer_env: bool = True) -> Iterator[tuple[str, int | None]]:
    """Yields (redis URL, pid of the redis-server we started or None).

    $REDIS_URL wins when set (prefer_env); else a redis-server on a free port, stopped
    (SIGTERM, our own pid only) on exit; else redis://127.0.0.1:6379/0.
    Raises RuntimeError when the started server does not answer within 5 s."""
    env = os.environ.get("REDIS_URL") if prefer_env else None
    exe = shutil.which("redis-server")
    if env or not exe:
        yield env or "redis://127.0.0.1:6379/0", None
        return
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="kbgate-bench-redis-")
    proc = subprocess.Popen([exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        for _ in range(100):
            if _answers(url):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError(f"the throwaway redis-server on port {port} did not answer")
        yield url, proc.pid
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(tmp, ignore_errors=True)


LEXICAL = "none"


def lexical_keyword() -> str | None:
    """The config's word for a lexical index (`dense = "none"`), or None when this gateway has
    none (before hybrid became the default, an index without a dense line was lexical)."""
    from indexes.dense import config

    return getattr(config, "NONE", None)


def dense_lines(dense: Mapping[str, str]) -> list[str]:
    """`[indexes.NAME]` tables naming each index's path: `dense = MODEL`, or for "none" the
    gateway's lexical keyword (nothing where the gateway has none: lexical is its default)."""
    none = lexical_keyword()
    out = []
    for index, model in dense.items():
        value = none if model == LEXICAL else model
        if value is not None:
            out.append(f'[indexes.{json.dumps(index)}]\ndense = {json.dumps(value)}')
    return out


class CorpusConfig:
    """Paths of one written config: `config`, `secret_file` (callback HMAC key),
    `token_file` (Bearer token), and `routes` (route name → index name)."""

    def __init__(self, config: Path, secret_file: Path, token_file: Path, routes: Mapping[str, str]) -> None:
        self.config, self.secret_file, self.token_file, self.routes = config, secret_file, token_file, dict(routes)


def _secret_file(path: Path, value: str) -> Path:
    if not path.exists():
        path.write_text(value)
        path.chmod(0o600)
    return path


def write_routes_config(workdir: Path, indexes_dir: Path, routes: Mapping[str, str], port: int, workers: int,
                        redis_url: str, name: str = "corpora",
                        grants: Sequence[str] = ("knowledge.search",),
                        answer_cache_entries: int | None = None,
                        dense: Mapping[str, str] | None = None) -> CorpusConfig:
    """Write `workdir/gateway-NAME.toml` serving each route → index of `routes` (see module
    docstring) on 127.0.0.1:port; returns its CorpusConfig. Route names must be plain
    identifiers (letters, digits, '-', '_'); grants: the agent client's tools;
    answer_cache_entries: `[search] answer_cache_entries` (None: the gateway's default). With
    the grant `documents.write` the client may write every index of `routes` (the document API).
    dense: index → "none" (lexical) or an embedded model (hybrid), written as `[indexes.NAME]
    dense = ...` (`dense_lines`), so a path is named whatever the gateway's default is."""
    workdir.mkdir(parents=True, exist_ok=True)
    secret_file = _secret_file(workdir / "bench.secret", secrets.token_urlsafe(32))
    token_file = _secret_file(workdir / "bench.token", "bench-" + secrets.token_urlsafe(32))
    ref_key = _secret_file(workdir / "bench.refkey", secrets.token_urlsafe(48))
    token_sha = hashlib.sha256(token_file.read_text().strip().encode("ascii")).hexdigest()
    q = json.dumps
    lines = [
        f'[server]\nbind = "127.0.0.1:{port}"\nworkers = {workers}',
        f'[replay]\nredis_url = {q(redis_url)}\ntolerance_seconds = 300\n'
        f'key_prefix = "kbgate-bench-{os.getpid()}-{time.time_ns() % 10**9}"',
        f'[indexes]\ndir = {q(str(indexes_dir.resolve()))}',
        *dense_lines(dense or {}),
        '[log]\nlevel = "info"',
        *([] if answer_cache_entries is None else [f'[search]\nanswer_cache_entries = {answer_cache_entries}']),
        f'[tenants.{TENANT}]',
        f'[[tenants.{TENANT}.secrets]]\nid = "bench"\nvalue_file = {q(str(secret_file.resolve()))}',
    ]
    for route, index in routes.items():
        lines.append(f'[[tenants.{TENANT}.routes]]\nfirst_level_id = "{FIRST_LEVEL_ID}"\n'
                     f'second_level_id = {q(route)}\nindex = {q(index)}')
    lines.append(f'[agent]\nref_key_file = {q(str(ref_key.resolve()))}')
    for route, index in routes.items():
        lines.append(f'[agent.routes.{q(route)}]\nindex = {q(index)}')
    lines.append(f'[agent.clients.bench]\nroutes = {q(list(routes))}\ntools = {q(list(grants))}\n'
                 f'datasets = ["*"]\npath_globs = ["**"]'
                 + (f'\nwrite_indexes = {q(sorted(set(routes.values())))}' if "documents.write" in grants else ""))
    lines.append(f'[[agent.clients.bench.tokens]]\nid = "bench"\nsha256 = "{token_sha}"')
    cfg = workdir / f"gateway-{name}.toml"
    cfg.write_text("\n\n".join(lines) + "\n")
    return CorpusConfig(cfg, secret_file, token_file, routes)
