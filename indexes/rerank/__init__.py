"""The optional rerank stage of an index: a served reranker reorders the best chunks.

Opt-in per index (`[indexes.<name>.rerank]`). The interface, in one place:
- `RerankConfig` (config.py): an index's settings.
- Providers (providers.py): the wire formats 'cohere' (`POST /v1/rerank`, the de-facto shape
  of Jina, vLLM, Xinference, LiteLLM, New API, OpenVINO), 'tei' (text-embeddings-inference
  `POST /rerank`) and 'dashscope' (Alibaba Model Studio text-rerank), behind `Reranker`.
- `RerankStage` (stage.py): one index's deadline, breaker and counted outcomes; its `scores`
  never raises and answers None to keep the order of the stage before.
- chunks.py: the stage applied to the lexical chunk order (`reranked_hits`, called by
  `KnowledgeIndex.search`) and to the fused one (`rerank_fused`, by `HybridIndex`), before the
  one-per-document collapse. `indexes.dense.HybridStore` attaches a stage to each index
  configured with one.
"""

from __future__ import annotations

from .config import PROVIDERS, RerankConfig
from .providers import CohereReranker, DashScopeReranker, Reranker, TeiReranker, make_reranker
from .stage import OUTCOMES, Observe, RerankStage

__all__ = ["OUTCOMES", "PROVIDERS", "CohereReranker", "DashScopeReranker", "Observe", "RerankConfig", "RerankStage",
           "Reranker", "TeiReranker", "make_reranker"]
