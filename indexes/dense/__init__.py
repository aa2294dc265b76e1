"""Hybrid retrieval: dense vectors beside the Tantivy index, fused with BM25. Opt-in per index.

Rationale: docs/design-notes.md, "indexes/dense/__init__.py".
"""

from __future__ import annotations

from .config import ApiKey, DenseConfig
from .index import HybridIndex, HybridStore
from .providers import Embedder, LocalEmbedder, OpenAIEmbedder, make_embedder
from .sync import DenseReport

__all__ = ["ApiKey", "DenseConfig", "DenseReport", "Embedder", "HybridIndex", "HybridStore", "LocalEmbedder",
           "OpenAIEmbedder", "make_embedder"]
