"""Embedding a build's chunks on every core: a pool of processes, each loading the local model once.

Rationale: docs/design-notes.md, "indexes/dense/parallel.py".
"""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from .config import DenseConfig
from .providers import LocalEmbedder, Vectors

__all__ = ["POOL_FROM", "PassagePool", "build_workers"]

POOL_FROM = 256  # texts to embed in one round before a build starts the pool (a round: sync.STAGE_FLUSH_TEXTS)

_embedder: LocalEmbedder | None = None  # the model of this pool process


def build_workers() -> int:
    """Processes a build embeds on: the cores this process may run on (`os.sched_getaffinity`)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # pragma: no cover - not Linux
        return max(os.cpu_count() or 1, 1)


def _start(config: DenseConfig) -> None:
    global _embedder
    _embedder = LocalEmbedder(config)
    _embedder.warm()


def _embed(texts: Sequence[str]) -> tuple[Vectors, float]:
    """(vectors of `texts`, CPU seconds this process spent on them)."""
    assert _embedder is not None
    t0 = time.process_time()
    vectors = _embedder.embed_passages(texts)
    return vectors, time.process_time() - t0


class PassagePool:
    """`workers` processes embedding passages with the local model of `config` (threads 1 each).

    `embed(batches)` yields (vectors, CPU seconds) per batch, in order; raises EmbeddingError
    as the in-process model would (not installed, bad output). `close()` stops the processes.
    """

    def __init__(self, config: DenseConfig, workers: int) -> None:
        if config.provider != "local":
            raise ValueError("only a local model is embedded in a process pool")
        self.workers = workers
        one_thread = DenseConfig(**{**_fields(config), "threads": 1})
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                         initializer=_start, initargs=(one_thread,))

    def embed(self, batches: Sequence[Sequence[str]]) -> Iterator[tuple[Vectors, float]]:
        futures = [self._pool.submit(_embed, list(b)) for b in batches]
        try:
            for f in futures:
                yield f.result()
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _fields(config: DenseConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in DenseConfig.__dataclass_fields__}
