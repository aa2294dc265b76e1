"""Hybrid retrieval: dense vectors beside the Tantivy index, fused with BM25. Opt-in per index.

The interface, in one place:
- `DenseConfig` (config.py): an index's settings (`[indexes.<name>.dense]`).
- `HybridStore` (index.py): the `IndexStore` of a process with hybrid settings; it opens an
  index configured hybrid as `HybridIndex`, whose `search` is the one search entry every
  caller already uses and whose `ingest` embeds and publishes vectors. Lexical answers
  whenever the dense side cannot answer in time. `HybridIndex.search_may_wait` is True: a
  caller on an event loop runs its searches in a worker thread (gateway/core/retrieve.py).
- Providers (providers.py): `OpenAIEmbedder` (any OpenAI-compatible /embeddings endpoint)
  and `LocalEmbedder` (a model shipped inside a wheel), behind `Embedder`.
Inside: the query embedding's deadline and breaker (query.py), the vector set per
generation (vectors.py, usearch), writer-side reconciliation (sync.py), reader-side pairing
and the fused search (hybrid.py), fusion rules (fusion.py), the embedding cache (cache.py).
"""

from __future__ import annotations

from .config import ApiKey, DenseConfig
from .index import HybridIndex, HybridStore
from .providers import Embedder, LocalEmbedder, OpenAIEmbedder, make_embedder
from .sync import DenseReport

__all__ = ["ApiKey", "DenseConfig", "DenseReport", "Embedder", "HybridIndex", "HybridStore", "LocalEmbedder",
           "OpenAIEmbedder", "make_embedder"]
