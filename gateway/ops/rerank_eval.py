"""`make eval`'s rerank column: the same signed callbacks with `[indexes.<name>.rerank]` on,
served by the stand-in reranker (tests/support/rerank_server.py: the embedded USE model's cosine
similarity as a STAND-IN for a cross-encoder's relevance; it measures the stage's plumbing and
the latency it adds, not what a real reranker such as bge-reranker or gte-rerank would score).

How the eval calls it (kept apart from gateway/ops/evaluate.py so that either can change):

    with stand_in_reranker() as url:
        rerank = _by_callback(corpus, sets, workdir, rerank_toml(corpus.name, url))

`_by_callback` already times every callback, so the latency the stage adds is the rerank
column's latency minus the lexical (or hybrid) column's, on the same questions; the stage's
own time is also in /metrics (`kbgate_rerank_duration_seconds`).
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

__all__ = ["RERANK_CANDIDATES", "RERANK_TIMEOUT_MS", "rerank_toml", "stand_in_reranker"]

RERANK_CANDIDATES = 20
RERANK_TIMEOUT_MS = 5000  # long enough that no question falls back: the column scores the stage
ROOT = Path(__file__).resolve().parents[2]


def rerank_toml(index: str, url: str, *, candidates: int = RERANK_CANDIDATES,
                timeout_ms: int = RERANK_TIMEOUT_MS) -> str:
    """The `[indexes.<index>.rerank]` table sending the first `candidates` chunks to the
    Cohere-shaped endpoint `url` (appended to the eval server's config)."""
    return (f'[indexes.{index}.rerank]\nprovider = "cohere"\nurl = "{url}"\nmodel = "stand-in"\n'
            f"candidates = {candidates}\ntimeout_ms = {timeout_ms}\nbreaker_failures = 100\n")


@contextmanager
def stand_in_reranker(ready_seconds: float = 60.0) -> Iterator[str]:
    """Run the stand-in rerank server (a subprocess of this checkout's tests/support) on a free
    port; yield its Cohere-shaped endpoint URL; stop it on exit. Raises RuntimeError when it is
    not ready within ready_seconds (the model loads in about 1 s)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.rerank_server", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_seconds
        while True:
            try:
                if httpx.get(f"{base}/readyz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the stand-in rerank server did not start")
            time.sleep(0.2)
        yield f"{base}/v1/rerank"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
