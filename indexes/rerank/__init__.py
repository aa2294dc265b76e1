"""The optional rerank stage of an index: a served reranker reorders the best chunks.

Rationale: docs/design-notes.md, "indexes/rerank/__init__.py".
"""

from __future__ import annotations

from .config import PROVIDERS, RerankConfig
from .providers import CohereReranker, DashScopeReranker, Reranker, TeiReranker, make_reranker
from .stage import OUTCOMES, Observe, RerankStage

__all__ = ["OUTCOMES", "PROVIDERS", "CohereReranker", "DashScopeReranker", "Observe", "RerankConfig", "RerankStage",
           "Reranker", "TeiReranker", "make_reranker"]
