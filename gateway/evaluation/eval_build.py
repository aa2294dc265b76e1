"""What hybrid retrieval costs to build, for `kbgate eval`: CPU time to embed chunks with a local
model ("build time per 1,000 chunks"). An index's vectors are computed once at ingest and
cached by content; this is what the first run, or a changed chunk, pays."""

from __future__ import annotations

import time
from collections.abc import Sequence

from indexes.dense import DenseConfig, LocalEmbedder
from indexes.dense.texts import passage_text
from indexes.ingest.chunking import chunk
from indexes.types import Document

__all__ = ["build_cost"]


def build_cost(documents: Sequence[Document], config: DenseConfig, sample: int = 200) -> tuple[float, int]:
    """(CPU seconds of this process, chunks) to embed up to `sample` chunks of `documents` (one
    chunk in every len/sample, as ingest cuts and embeds them: title, heading, text) with
    `config`'s local model, bypassing the embedding cache, after the model is loaded. (0.0, 0) for
    a served provider ("openai": its cost is the service's) or no chunk. Raises
    EmbeddingUnavailable when the model's package is missing."""
    if config.provider != "local":
        return 0.0, 0
    every = [(d.title, c) for d in documents for c in chunk(d)]
    picked = every[::max(len(every) // max(sample, 1), 1)][:sample]
    texts = [passage_text(title, c.heading, c.text) for title, c in picked]
    if not texts:
        return 0.0, 0
    embedder = LocalEmbedder(config)
    try:
        embedder.warm()
        started = time.process_time()
        embedder.embed_passages(texts)
        return time.process_time() - started, len(texts)
    finally:
        embedder.close()
