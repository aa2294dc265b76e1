"""Run the gateway under hypercorn with uvloop workers.

`gateway.serve.master` starts the workers (SIGHUP → in-process reload, not hypercorn's restart).
Each worker process imports `gateway.serve.asgi:app`, which loads the config named by the
KBGATE_CONFIG environment variable; indexes are opened read-only (mmap) in every worker.
"""

from __future__ import annotations

import os
import sys
import time

from hypercorn.config import Config as HypercornConfig

from gateway.core.config import Config, report_state
from gateway.core.errors import ConfigError
from gateway.core.logs import setup_logging
from gateway.core.redis_clients import describe
from gateway.ops.metrics import prepare_multiprocess_dir, remove_multiprocess_dir
from gateway.serve.lifeline import port_in_use
from gateway.serve.master import run

CONFIG_ENV = "KBGATE_CONFIG"


def hypercorn_config(config: Config, bind: str | None = None, workers: int | None = None) -> HypercornConfig:
    """Hypercorn settings from our config (bind HOST:PORT, workers ≥ 1, uvloop)."""
    n = workers if workers is not None else config.server.workers
    if n < 1:
        raise ConfigError("server.workers", "must be at least 1")
    if n > 1 and config.replay.redis_url is None:
        raise ConfigError(
            "server.workers",
            f"is {n}, but the in-process replay store serves one worker only; set replay.redis_url",
        )
    hc = HypercornConfig()
    hc.bind = [bind or config.server.bind]
    hc.workers = n
    hc.worker_class = "uvloop"
    hc.application_path = "gateway.serve.asgi:app"
    hc.graceful_timeout = config.server.graceful_timeout
    hc.accesslog = None
    hc.errorlog = "-"
    # Also the bound on request headers: hypercorn's idle timer runs from the end of the last
    # response (or the connection's start) until a request's headers are complete.
    hc.keep_alive_timeout = config.server.keep_alive_seconds
    return hc


def serve(config: Config, bind: str | None = None, workers: int | None = None) -> int:
    """Serve until SIGINT/SIGTERM; SIGHUP reloads the config in every worker, a worker that
    dies is replaced (gateway.serve.master).

    Returns 0 after a clean shutdown, 1 when workers kept dying at start-up (a crash loop).
    """
    hc = hypercorn_config(config, bind, workers)
    setup_logging(config.log_level)
    assert config.source is not None
    os.environ[CONFIG_ENV] = str(config.source)
    held = port_in_use(hc)  # SO_REUSEPORT would let this start share the port with another server's workers
    if held is not None:
        raise ConfigError("server.bind", held)
    try:  # bind before announcing anything, so a taken port is one clear line
        sockets = hc.create_sockets()
    except OSError as exc:
        raise ConfigError("server.bind", f"{hc.bind[0]} cannot be bound: {exc.strerror or exc}") from None
    replay = describe(config.replay.redis_url) if config.replay.redis_url else "in-process"
    print(f"kbgate: serving on http://{hc.bind[0]} with {hc.workers} worker(s), replay store {replay}",
          file=sys.stderr, flush=True)
    now = time.time()
    for t in config.tenants.values():
        if t.mode(now) == "report":
            print(f"kbgate: WARNING tenant {t.name} is in report mode{report_state(t, now)}: unsigned requests "
                  "are answered", file=sys.stderr, flush=True)
    # Before the workers spawn, so each one's prometheus-client writes to the shared folder.
    metrics_dir, created = prepare_multiprocess_dir()
    try:
        return run(hc, config, sockets)
    finally:
        if created:
            remove_multiprocess_dir(metrics_dir)
