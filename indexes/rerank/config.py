"""Settings of one index's rerank stage (`[indexes.<name>.rerank]` in the gateway config).

Rationale: docs/design-notes.md, "indexes/rerank/config.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from ..dense.config import ApiKey

__all__ = ["PROVIDERS", "RerankConfig"]

PROVIDERS = ("cohere", "tei", "dashscope")
"""Wire formats (`indexes.rerank.providers`): 'cohere' (`POST /v1/rerank`, also Jina, vLLM,
Xinference, LiteLLM, New API, OpenVINO), 'tei' (text-embeddings-inference `POST /rerank`),
'dashscope' (Alibaba Model Studio `text-rerank`)."""


@dataclass(frozen=True, slots=True)
class RerankConfig:
    """One index's rerank settings.

    provider: one of PROVIDERS. url: the full URL of the rerank endpoint. model: the `model`
        string sent ('' for 'tei', which serves one model and takes none).
    api_key: optional, sent as `Authorization: Bearer` (never logged).
    candidates: how many of the stage before's best chunks are reranked (N); chunks past them
        keep their order after the reranked ones.
    timeout_ms: the per-query deadline of the rerank call, from its start; past it the search
        answers in the order of the stage before.
    breaker_failures / breaker_reset_seconds: that many consecutive failures (errors or missed
        deadlines) open the circuit breaker: no rerank call for that long, then one trial.
    max_input_chars: each document sent is cut to this many characters (title, heading, text).
    Raises ValueError for an unknown provider, a missing url or a bound below 1.
    """

    provider: str
    url: str
    model: str = ""
    api_key: ApiKey | None = None
    candidates: int = 20
    timeout_ms: int = 500
    breaker_failures: int = 3
    breaker_reset_seconds: float = 30.0
    max_input_chars: int = 1000

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}")
        if not self.url:
            raise ValueError("a rerank stage needs url")
        if min(self.candidates, self.timeout_ms, self.breaker_failures, self.max_input_chars) < 1:
            raise ValueError("candidates, timeout_ms, breaker_failures and max_input_chars must be at least 1")
