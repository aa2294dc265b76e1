"""A test's own HTTP service (an embedding or rerank stand-in) as a real hypercorn process:
`running(module, port)` starts `python -m module --port PORT` and yields its base URL;
`main(make_app)` is that module's entry point."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.harness import Server
from tests.support.paths import ROOT


@contextmanager
def running(module: str, port: int) -> Iterator[str]:
    """Start `module` on 127.0.0.1:port in a subprocess (the harness's `Server`: ready once
    hypercorn listens and /readyz answers); yield its base URL; stop it on exit."""
    with Server([sys.executable, "-m", module, "--port", str(port)], port, cwd=ROOT) as srv:
        yield srv.base


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
