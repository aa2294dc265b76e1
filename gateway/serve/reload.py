"""Live reload of tenants, secrets and routes in every worker, without a restart.

Rationale: docs/design-notes.md, "gateway/serve/reload.py".
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gateway.core.config import Config, SecretKey, Tenant, load_config, read_signing_key
from gateway.core.config.edit import RELOAD_INTERVAL
from gateway.core.errors import ConfigError
from gateway.core.runtime import Runtime

log = logging.getLogger("kbgate.reload")

INTERVAL = RELOAD_INTERVAL
RESTART_ONLY = ("server", "replay", "indexes_dir", "dense", "rerank", "remote")

# Set by gateway.serve.master in each worker: a multiprocessing.Value('Q') bumped on SIGHUP,
# and the config the master validated at start (used only when the file is invalid now).
_generation: Any = None
_fallback: Config | None = None
_start_refusal: dict[str, str] | None = None  # set when this worker started on the fallback

Fingerprint = tuple[tuple[str, int, int, int], ...]


def set_generation_source(value: Any) -> None:
    """Install the shared SIGHUP generation counter of this worker (a lock-free shared integer
    the master alone writes, `multiprocessing.Value(..., lock=False)`)."""
    global _generation
    _generation = value


def set_fallback_config(config: Config | None) -> None:
    """Install the master's start-up config: a worker (re)started while the file is invalid runs it.
    None uninstalls it, and forgets a start-up refusal recorded with it."""
    global _fallback, _start_refusal
    _fallback = config
    if config is None:
        _start_refusal = None


def load_worker_config(path: str | os.PathLike[str]) -> Config:
    """The config a starting worker serves: the file when valid, else the master's start-up config.

    Without the fallback a worker replaced while someone's bad edit sits in the file would
    crash at import and stop the whole service. The rejection is logged naming the key; the
    file is loaded again once it changes (`Reloader`). Raises ConfigError when there is no
    fallback (a worker not started by gateway.serve.master).
    """
    try:
        return load_config(path)
    except ConfigError as err:
        if _fallback is None:
            raise
        from gateway.core.logs import setup_logging

        setup_logging(_fallback.log_level)
        global _start_refusal
        _start_refusal = refusal(err, path, "start")
        log.error("config rejected at worker start, serving the config the master started with",
                  extra={**_start_refusal, "pid": os.getpid()})
        return _fallback


def refusal(err: ConfigError, path: str | os.PathLike[str] | None, trigger: str) -> dict[str, str]:
    """The record of one refused load: {"at": RFC 3339 UTC, "key", "problem" (the
    `ConfigError.message` that `kbgate check-config` prints for the same file), "file",
    "trigger" ('start' | 'file' | 'sighup' | 'manual')}. Holds no value of the file."""
    at = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return {"at": at, "key": err.key, "problem": err.message, "file": str(path), "trigger": trigger}


def current_generation() -> int:
    """The master's reload generation (0 when not started by `gateway.serve.master`)."""
    return int(_generation.value) if _generation is not None else 0


def watched_files(config: Config) -> list[Path]:
    """The config file (when known), every `value_file` secret of every tenant, and every
    index's synonyms file (`[indexes.NAME] synonyms`: an owner's edit applies without a restart)."""
    files = [config.source] if config.source is not None else []
    for t in config.tenants.values():
        files.extend(Path(k.source[5:]) for k in t.secrets if k.source.startswith("file:"))
    files.extend(Path(s.source) for s in config.synonyms.values())
    return files


def fingerprint(paths: list[Path]) -> Fingerprint:
    """(path, mtime ns, size, inode) per path; a missing file gives zeros. stat() only."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
            out.append((str(p), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((str(p), 0, 0, 0))
    return tuple(out)


def reload_config(old: Config, env: dict[str, str] | None = None) -> tuple[Config, list[str]]:
    """Load `old.source` again; return (new config, restart-only keys that changed).

    The new config keeps old's server, replay, indexes_dir, dense, rerank, remote (the engines
    serving indexes) and mcp.path (they need a restart).
    When `old.source` is None only `value_file` secrets are re-read (`refresh_secrets`).
    Raises ConfigError naming the offending key; nothing is swapped then.
    """
    if old.source is None:
        return refresh_secrets(old, env), []
    new = load_config(old.source, env=env)
    changed = [k for k in RESTART_ONLY if getattr(new, k) != getattr(old, k)]
    if new.mcp.path != old.mcp.path:  # the MCP endpoint's route is built at start
        changed.append("mcp.path")
    return dataclasses.replace(new, server=old.server, replay=old.replay, indexes_dir=old.indexes_dir,
                               dense=old.dense, rerank=old.rerank, remote=old.remote,
                               mcp=dataclasses.replace(new.mcp, path=old.mcp.path)), changed


def refresh_secrets(old: Config, env: dict[str, str] | None = None) -> Config:
    """`old` with every `file:` secret read again (a Kubernetes secret rotated on disk).

    Raises ConfigError naming the secret's key (empty or unreadable file).
    """
    env_map = os.environ if env is None else env
    tenants: dict[str, Tenant] = {}
    for name, t in old.tenants.items():
        keys = []
        for i, k in enumerate(t.secrets):
            if k.source.startswith("file:"):
                value = read_signing_key(k.source, f"tenants.{name}.secrets[{i}].value_file", Path("/"), env_map)
                k = SecretKey(k.id, value, k.not_after, k.source)
            keys.append(k)
        tenants[name] = dataclasses.replace(t, secrets=tuple(keys))
    return dataclasses.replace(old, tenants=tenants)


class Reloader:
    """Watches one worker's config and swaps `rt.config` when it changes (see module doc).

    rt: the worker's Runtime (only `rt.config` is read and assigned). interval: seconds
    between two checks. on_swap(config): called after a successful swap (optional).
    on_outcome(outcome): called with 'reloaded' or 'rejected' after every load (the metric).
    last_refusal: the `refusal` record of the last refused load (None while none was), the
    worker's start on the master's config included. refused: whether the last load was refused,
    i.e. the file on disk is not what this worker serves.
    """

    def __init__(self, rt: Runtime, interval: float = INTERVAL,
                 on_swap: Callable[[Config], None] | None = None,
                 on_outcome: Callable[[str], None] | None = None) -> None:
        self.rt = rt
        self.interval = interval
        self.on_swap = on_swap
        self.on_outcome = on_outcome
        self.last_refusal: dict[str, str] | None = _start_refusal
        self.refused = _start_refusal is not None
        self._seen = fingerprint(watched_files(rt.config))
        self._generation = current_generation()

    def config_state(self) -> dict[str, Any]:
        """/readyz's "config": {"file": the config file or None, "serving": "file" | "previous"
        (the file's last load was refused: an older config serves), "last_refusal": record or None}."""
        source = self.rt.config.source
        return {"file": None if source is None else str(source), "serving": "previous" if self.refused else "file",
                "last_refusal": self.last_refusal}

    def _outcome(self, outcome: str) -> str:
        if self.on_outcome is not None:
            try:
                self.on_outcome(outcome)
            except Exception:  # a metric must never stop a reload
                log.warning("reload outcome observer failed", exc_info=True)
        return outcome

    def check(self) -> str | None:
        """One check. Returns 'reloaded', 'rejected', or None when nothing changed."""
        generation = current_generation()
        fp = fingerprint(watched_files(self.rt.config))
        if fp == self._seen and generation == self._generation:
            return None
        trigger = "sighup" if generation != self._generation else "file"
        self._seen, self._generation = fp, generation
        return self.reload(trigger)

    def reload(self, trigger: str = "manual") -> str:
        """Load and swap now. Returns 'reloaded' or 'rejected' (old config kept, logged)."""
        old = self.rt.config
        try:
            new, restart = reload_config(old)
        except ConfigError as err:
            self.last_refusal, self.refused = refusal(err, old.source, trigger), True
            log.error("config rejected, the running config keeps serving",
                      extra={**self.last_refusal, "pid": os.getpid()})
            return self._outcome("rejected")
        self.rt.config = new
        self.refused = False
        # A reload may add a value_file: watch the files of the new config from now on.
        self._seen = fingerprint(watched_files(new))
        logging.getLogger("kbgate").setLevel(new.log_level.upper())
        log.info("config reloaded", extra={
            "file": str(new.source), "trigger": trigger, "pid": os.getpid(), "tenants": sorted(new.tenants),
            "needs_restart": [{"indexes_dir": "indexes.dir", "dense": "indexes.*.dense",
                                                          "rerank": "indexes.*.rerank"}.get(k, k) for k in restart]})
        for t in new.tenants.values():
            if t.mode(self.rt.clock.now()) == "report":
                log.warning("tenant in report mode: unsigned requests are answered",
                            extra={"tenant": t.name, "report_until": t.report_until})
        if self.on_swap is not None:
            self.on_swap(new)
        return self._outcome("reloaded")

    async def run(self) -> None:
        """Check every `interval` seconds until cancelled. Never raises otherwise."""
        while True:
            await asyncio.sleep(self.interval)
            try:
                self.check()
            except Exception:  # a bug here must not stop the watching
                log.exception("config check failed")
