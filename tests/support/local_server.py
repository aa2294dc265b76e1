"""A test's own HTTP service (an embedding or rerank stand-in) as a real hypercorn process:
`running(module, port)` starts `python -m module --port PORT` and yields its base URL;
`main(make_app)` is that module's entry point."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import httpx
import pytest

from tests.support.harness import Server, free_port
from tests.support.paths import ROOT


@contextmanager
def running(module: str, port: int) -> Iterator[str]:
    """Start `module` on 127.0.0.1:port in a subprocess (the harness's `Server`: ready once
    hypercorn listens and /readyz answers); yield its base URL; stop it on exit."""
    with Server([sys.executable, "-m", module, "--port", str(port)], port, cwd=ROOT) as srv:
        yield srv.base


def module_fixture(start: Callable[[int], AbstractContextManager[str]]) -> Any:
    """A module-scoped pytest fixture named `server`: `start(port)` on a free port, yielding its
    base URL; assign it to a module-level name to use it."""
    @pytest.fixture(name="server", scope="module")
    def _server() -> Iterator[str]:
        with start(free_port()) as base:
            yield base
    return _server


def control(base: str, **settings: Any) -> None:
    """POST `settings` to a test server's /control (its mode, delay, failures …)."""
    httpx.post(f"{base}/control", json=settings).raise_for_status()


def reset(base: str, **settings: Any) -> None:
    """POST /reset to a test server at `base`, then `control` with `settings` when given."""
    httpx.post(f"{base}/reset").raise_for_status()
    if settings:
        control(base, **settings)


def reset_fixture() -> Any:
    """An autouse pytest fixture resetting the module's `server` before each test; assign it to a
    module-level name to use it."""
    @pytest.fixture(autouse=True)
    def _reset(server: str) -> None:
        reset(server)
    return _reset


def main(make_app: Callable[[], Any]) -> None:
    """Serve `make_app()` on 127.0.0.1:--port with hypercorn, no access log."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    cfg = Config()
    cfg.bind = [f"127.0.0.1:{args.port}"]
    cfg.accesslog = None
    cfg.errorlog = "-"  # hypercorn's "Running on http://…" line: what the harness waits for
    asyncio.run(serve(make_app(), cfg))
