"""The floor: a bare Starlette endpoint on the same hypercorn settings as `kbgate serve`.

Rationale: docs/design-notes.md, "bench/floor.py".
"""

from __future__ import annotations

import argparse
import os
import sys

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

BODY_ENV = "BENCH_FLOOR_BODY"
_DEFAULT_BODY = b'{"Ret":0,"Msg":"success","Result":[]}'
_BODY = open(os.environ[BODY_ENV], "rb").read() if os.environ.get(BODY_ENV) else _DEFAULT_BODY


async def _answer(request: Request) -> Response:
    await request.body()
    return Response(_BODY, media_type="application/json")


async def _ready(request: Request) -> Response:
    return Response(b'{"status":"ready"}', media_type="application/json")


app = Starlette(routes=[Route("/readyz", _ready), Route("/{path:path}", _answer, methods=["POST"])])


def serve_on_gateway_settings(application_path: str, argv: list[str] | None = None) -> int:
    """Serve `application_path` ('module:app') with the hypercorn settings `kbgate serve` takes
    from `--config`, on `--bind` with `--workers` (argv: those three options; sys.argv when None).
    Returns hypercorn's exit status. The floor's and the minimal gateway's one runner."""
    from hypercorn.run import run

    from gateway.core.config import load_config
    from gateway.serve.server import hypercorn_config

    p = argparse.ArgumentParser(prog=f"python -m {application_path.split(':')[0]}")
    p.add_argument("--config", required=True)
    p.add_argument("--bind", required=True)
    p.add_argument("--workers", type=int, required=True)
    args = p.parse_args(argv)
    hc = hypercorn_config(load_config(args.config), args.bind, args.workers)
    hc.application_path = application_path
    return int(run(hc) or 0)


def main(argv: list[str] | None = None) -> int:
    return serve_on_gateway_settings("bench.floor:app", argv)


if __name__ == "__main__":
    sys.exit(main())
