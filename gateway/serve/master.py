"""The process that starts hypercorn workers, replaces the ones that die, and turns SIGHUP
into a reload, not a restart.

Rationale: docs/design-notes.md, "gateway/serve/master.py".
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections import deque
from dataclasses import dataclass
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from typing import Any

from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets

log = logging.getLogger("kbgate.master")

CRASH_LOOP_DEATHS = 5  # deaths of young workers that make a crash loop...
CRASH_LOOP_SECONDS = 30.0  # ...each younger than this, all within this many seconds
CRASH_LOOP_EXIT = 1  # the master's exit code after a crash loop (gateway/cli.py: the operation failed)


def _worker(config: HypercornConfig, sockets: Sockets, shutdown_event: EventType, generation: Any,
            app_config: Any, master_pid: int) -> None:
    """Body of one worker process: stop when the master dies (`gateway.serve.lifeline`),
    install the generation counter and the master's config (fallback for an invalid file, see
    `gateway.serve.reload.load_worker_config`), run hypercorn's worker."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from gateway.serve.lifeline import die_with_master

    die_with_master(master_pid, shutdown_event, config.graceful_timeout)
    from gateway.serve.reload import set_fallback_config, set_generation_source

    set_generation_source(generation)
    set_fallback_config(app_config)
    from gateway.serve.coalesce import install

    install()  # one write per sized response
    if config.worker_class == "uvloop":
        from hypercorn.asyncio.run import uvloop_worker as run_worker
    else:
        from hypercorn.asyncio.run import asyncio_worker as run_worker
    run_worker(config, sockets, shutdown_event)


@dataclass(slots=True)
class _Worker:
    """One worker process, its own shutdown event and when it was started (monotonic seconds)."""

    process: BaseProcess
    shutdown: EventType
    started: float


def describe_exit(exitcode: int | None) -> tuple[int | None, str | None]:
    """(exit status, signal name) of a `multiprocessing` exit code: -9 → (None, 'SIGKILL'),
    1 → (1, None). A code of no known signal keeps its number."""
    if exitcode is not None and exitcode < 0:
        try:
            return None, signal.Signals(-exitcode).name
        except ValueError:
            return exitcode, None
    return exitcode, None


class CrashLoop:
    """Counts worker deaths; `death` says when they make a crash loop (see module doc).

    deaths: how many young deaths make one; seconds: how young a worker must die to count,
    and the window those deaths must fall in.
    """

    def __init__(self, deaths: int = CRASH_LOOP_DEATHS, seconds: float = CRASH_LOOP_SECONDS) -> None:
        self.deaths = deaths
        self.seconds = seconds
        self._young: deque[float] = deque()

    def death(self, started: float, now: float) -> bool:
        """Record a worker started at `started` and dead at `now` (monotonic seconds);
        True when this death completes a crash loop."""
        if now - started >= self.seconds:
            return False
        self._young.append(now)
        while self._young and now - self._young[0] > self.seconds:
            self._young.popleft()
        return len(self._young) >= self.deaths


def run(config: HypercornConfig, app_config: Any = None, sockets: Sockets | None = None,
        crash_loop: CrashLoop | None = None) -> int:
    """Serve with `config.workers` (≥ 1) worker processes until SIGINT/SIGTERM or a crash loop.

    app_config: the validated gateway Config, handed to every worker as its fallback.
    sockets: already bound listening sockets (`config.create_sockets()`), else bound here.
    crash_loop: when worker deaths stop the service (default `CrashLoop()`).

    SIGHUP: bump the reload generation (every worker reloads its config within ~1 s).
    Returns 0 after a clean shutdown, `CRASH_LOOP_EXIT` after a crash loop.
    """
    if config.workers < 1:
        raise ValueError("gateway.serve.master.run needs workers >= 1")
    ctx = multiprocessing.get_context("spawn")
    sockets = sockets if sockets is not None else config.create_sockets()
    generation = ctx.Value("Q", 0, lock=False)  # written by this process only (see module doc)
    loop = crash_loop or CrashLoop()
    active = True
    workers: list[_Worker] = []
    exitcode = 0

    def shutdown(*_: Any) -> None:
        nonlocal active
        active = False
        for w in workers:
            w.shutdown.set()

    def hangup(*_: Any) -> None:
        generation.value += 1
        log.info("SIGHUP: reload requested", extra={"generation": int(generation.value)})

    # Children inherit SIG_IGN for SIGINT, so a Ctrl-C reaches them only through their event.
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def spawn() -> _Worker:
        event = ctx.Event()
        process = ctx.Process(target=_worker, args=(config, sockets, event, generation, app_config, os.getpid()))
        process.daemon = config.daemon
        process.start()
        w = _Worker(process, event, time.monotonic())
        workers.append(w)
        return w

    def buried(w: _Worker) -> None:
        """Log the death of `w`; replace it, or stop everything when it completes a crash loop."""
        nonlocal exitcode
        now = time.monotonic()
        status, signame = describe_exit(w.process.exitcode)
        fields: dict[str, Any] = {"pid": w.process.pid, "exitcode": status, "signal": signame,
                                  "uptime_seconds": round(now - w.started, 1)}
        if loop.death(w.started, now):
            log.critical("workers keep dying at start-up, stopping the gateway", extra={
                **fields, "deaths": loop.deaths, "window_seconds": loop.seconds})
            exitcode = CRASH_LOOP_EXIT
            shutdown()
            return
        replacement = spawn()
        log.error("worker died, started a replacement", extra={**fields, "replacement_pid": replacement.process.pid})

    try:
        for _ in range(config.workers):
            spawn()
        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)
        signal.signal(signal.SIGHUP, hangup)
        while active:
            wait([w.process.sentinel for w in workers], timeout=1.0)
            for w in [w for w in workers if w.process.exitcode is not None]:
                w.process.join()
                workers.remove(w)
                if active:
                    buried(w)
    finally:
        for w in workers:
            w.shutdown.set()
        for w in workers:
            w.process.join(config.graceful_timeout + 5)
            if w.process.exitcode is None:
                w.process.terminate()
                w.process.join()
        for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
            sock.close()
    return exitcode
