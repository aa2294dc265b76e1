"""A generation store served over HTTP, as any static file server would (tests/e2e/test_replicas.py):
`python -m tests.support.store_server --port PORT` serves the folder $KBGATE_TEST_STORE at /;
`store_server(folder)` is that process on a free port, through the harness's `Server`.

Rationale: docs/design-notes.md, "tests/support/store_server.py".
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.support.harness import Server, free_port
from tests.support.local_server import main
from tests.support.paths import ROOT


def store_server(store: Path, *, stall: bool = False) -> Server:
    """The store folder served over HTTP by a real server on a free port (not started yet);
    stall: hang half-way through every object (module docstring)."""
    port = free_port()
    env = {"KBGATE_TEST_STORE": str(store), "KBGATE_TEST_STALL": "1" if stall else "0"}
    return Server([sys.executable, "-m", "tests.support.store_server", "--port", str(port)], port, env=env,
                  cwd=ROOT, log_path=store.parent / f"store-{port}.log")


def make_app() -> Starlette:
    root = Path(os.environ["KBGATE_TEST_STORE"]).resolve()
    stall = os.environ.get("KBGATE_TEST_STALL") == "1"

    async def readyz(request: Request) -> Response:
        return JSONResponse({"status": "ready"})

    async def file(request: Request) -> Response:
        rel = request.path_params["path"]
        path = (root / rel).resolve()
        if root not in path.parents or not path.is_file():
            return Response("not found", status_code=404)
        if not (stall and "/objects/" in f"/{rel}"):
            return FileResponse(path)
        data = path.read_bytes()

        async def half_then_hang() -> AsyncIterator[bytes]:
            yield data[: max(1, len(data) // 2)]
            print(f"stalled {rel}", file=sys.stderr, flush=True)
            await asyncio.sleep(3600)

        return StreamingResponse(half_then_hang(), headers={"content-length": str(len(data))})

    return Starlette(routes=[Route("/readyz", readyz), Route("/{path:path}", file)])


if __name__ == "__main__":
    main(make_app)
