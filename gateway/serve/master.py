"""The process that starts hypercorn workers and turns SIGHUP into a reload, not a restart.

hypercorn's own `hypercorn.run.run` answers SIGHUP by stopping and restarting every
worker process: indexes reopen, connections drop, nothing proves the new config is valid
first. kbgate wants a reload: every worker keeps running and swaps its config in-process
(`gateway.serve.reload`). So this master does what `hypercorn.run.run` does for
`workers ≥ 1` (spawn workers on shared sockets, SIGINT/SIGTERM → graceful shutdown through
the shutdown event, a worker that exits non-zero stops the service) but on SIGHUP it only
bumps a shared counter (`multiprocessing.Value`) that each worker's `Reloader` reads
once per second. Workers ignore SIGHUP themselves, so a hang-up sent to the whole process
group cannot kill them.

Why a shared counter rather than forwarding the signal: a counter cannot be lost or
arrive before a worker installed its handler, and it reaches every worker, including one
started after the signal.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from typing import Any

from hypercorn.config import Config as HypercornConfig
from hypercorn.config import Sockets

log = logging.getLogger("kbgate.master")


def _worker(config: HypercornConfig, sockets: Sockets, shutdown_event: EventType, generation: Any,
            app_config: Any) -> None:
    """Body of one worker process: install the generation counter and the master's config
    (fallback for an invalid file, see `gateway.serve.reload.load_worker_config`), run hypercorn's worker."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    from gateway.serve.reload import set_fallback_config, set_generation_source

    set_generation_source(generation)
    set_fallback_config(app_config)
    if config.worker_class == "uvloop":
        from hypercorn.asyncio.run import uvloop_worker as run_worker
    else:
        from hypercorn.asyncio.run import asyncio_worker as run_worker
    run_worker(config, sockets, shutdown_event)


def run(config: HypercornConfig, app_config: Any = None, sockets: Sockets | None = None) -> int:
    """Serve with `config.workers` (≥ 1) worker processes until SIGINT/SIGTERM.

    app_config: the validated gateway Config, handed to every worker as its fallback.
    sockets: already bound listening sockets (`config.create_sockets()`), else bound here.

    SIGHUP: bump the reload generation (every worker reloads its config within ~1 s).
    Returns 0 after a clean shutdown, else the exit code of the first failed worker.
    """
    if config.workers < 1:
        raise ValueError("gateway.serve.master.run needs workers >= 1")
    ctx = multiprocessing.get_context("spawn")
    sockets = sockets if sockets is not None else config.create_sockets()
    shutdown_event = ctx.Event()
    generation = ctx.Value("Q", 0)
    active = True

    def shutdown(*_: Any) -> None:
        nonlocal active
        active = False
        shutdown_event.set()

    def hangup(*_: Any) -> None:
        with generation.get_lock():
            generation.value += 1
        log.info("SIGHUP: reload requested", extra={"generation": int(generation.value)})

    # Children inherit SIG_IGN for SIGINT, so a Ctrl-C reaches them only through the event.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    processes: list[BaseProcess] = []
    exitcode = 0

    def spawn() -> None:
        worker = ctx.Process(target=_worker, args=(config, sockets, shutdown_event, generation, app_config))
        worker.daemon = config.daemon
        worker.start()
        processes.append(worker)

    try:
        for _ in range(config.workers):
            spawn()
        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)
        signal.signal(signal.SIGHUP, hangup)
        while active:
            wait([p.sentinel for p in processes], timeout=1.0)
            for i in reversed(range(len(processes))):
                p = processes[i]
                if p.exitcode is None:
                    continue
                p.join()
                del processes[i]
                if p.exitcode != 0 and active:
                    exitcode = p.exitcode
                    shutdown()
                elif active:
                    spawn()  # hypercorn's habit: a worker that ended cleanly is replaced
    finally:
        shutdown_event.set()
        for p in processes:
            p.join(config.graceful_timeout + 5)
            if p.exitcode is None:
                p.terminate()
                p.join()
        for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
            sock.close()
    return exitcode
