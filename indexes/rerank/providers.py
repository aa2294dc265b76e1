"""Rerank wire formats: one HTTP client, three request and answer shapes.

Rationale: docs/design-notes.md, "indexes/rerank/providers.py".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Protocol

import httpx

from ..dense.providers import RETRY_STATUSES
from ..errors import RerankResponseError, RerankUnavailable
from ..service_client import service_client
from .config import RerankConfig

__all__ = ["CohereReranker", "DashScopeReranker", "HttpReranker", "Reranker", "TeiReranker", "make_reranker"]


class Reranker(Protocol):
    """What the rerank stage needs from a provider.

    name: the provider name, for errors and metrics.
    scores(query, documents, timeout) → one relevance per document, in order, each in 0..1;
        one attempt within about `timeout` seconds; raises RerankError.
    """

    name: str

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]: ...

    def close(self) -> None: ...


class HttpReranker:
    """The HTTP client shared by the wire formats; a subclass says `body` and `results`.

    config: url, model, api_key, max_input_chars. transport: an httpx transport (None in
    production; tests use a real server).
    """

    name = "?"

    def __init__(self, config: RerankConfig, *, transport: httpx.BaseTransport | None = None) -> None:
        self.config = config
        self._client = service_client(config.api_key, transport)

    def body(self, query: str, documents: list[str]) -> dict[str, Any]:
        raise NotImplementedError

    def results(self, payload: Any) -> Any:
        """The list of {index, score} objects of `payload` (shape per provider)."""
        raise NotImplementedError

    score_field = "relevance_score"

    def scores(self, query: str, documents: Sequence[str], timeout: float) -> list[float]:
        """Relevance of each document to `query`, in the documents' order, clamped to 0..1."""
        if not documents:
            return []
        if timeout <= 0:
            raise RerankUnavailable(self.name, "timeout", "no time left")
        limit = self.config.max_input_chars
        docs = [d[:limit] or " " for d in documents]  # an empty document is refused by some servers
        try:
            r = self._client.post(self.config.url, json=self.body(query, docs), timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise RerankUnavailable(self.name, "timeout", f"no answer within {timeout:.3f} s") from None
        except httpx.TransportError as exc:
            raise RerankUnavailable(self.name, "connect", type(exc).__name__) from None
        if r.status_code in RETRY_STATUSES:
            raise RerankUnavailable(self.name, f"http_{r.status_code}")
        if r.status_code != 200:
            raise RerankResponseError(self.name, f"http_{r.status_code}")
        try:
            items = self.results(r.json())
            pairs = [(int(item["index"]), item[self.score_field]) for item in items]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RerankResponseError(self.name, "not_scores", "the answer has no results[].index and score") from None
        out: list[float | None] = [None] * len(docs)
        for i, s in pairs:
            if not 0 <= i < len(docs) or out[i] is not None:
                raise RerankResponseError(self.name, "bad_index", f"index {i} of {len(docs)} documents")
            if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s):
                raise RerankResponseError(self.name, "not_scores", "a score is not a finite number")
            out[i] = min(max(float(s), 0.0), 1.0)
        if any(s is None for s in out):
            raise RerankResponseError(self.name, "bad_count", f"{len(pairs)} scores for {len(docs)} documents")
        return [s for s in out if s is not None]

    def close(self) -> None:
        self._client.close()


class CohereReranker(HttpReranker):
    """Cohere's `POST /v1/rerank` shape (and every server that copies it; see module doc)."""

    name = "cohere"

    def body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"model": self.config.model, "query": query, "documents": documents, "top_n": len(documents),
                "return_documents": False}

    def results(self, payload: Any) -> Any:
        return payload["results"]


class TeiReranker(HttpReranker):
    """text-embeddings-inference's `POST /rerank`: `texts`, a bare list answered, `score`.
    TEI refuses more texts than its `--max-client-batch-size` (32 by default): keep
    `candidates` at or below it."""

    name = "tei"
    score_field = "score"

    def body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"query": query, "texts": documents, "raw_scores": False, "truncate": True}

    def results(self, payload: Any) -> Any:
        if not isinstance(payload, list):
            raise TypeError("not a list")
        return payload


class DashScopeReranker(HttpReranker):
    """Alibaba Model Studio (DashScope) `text-rerank`: `input` and `parameters` objects,
    `output.results` answered."""

    name = "dashscope"

    def body(self, query: str, documents: list[str]) -> dict[str, Any]:
        return {"model": self.config.model, "input": {"query": query, "documents": documents},
                "parameters": {"top_n": len(documents), "return_documents": False}}

    def results(self, payload: Any) -> Any:
        return payload["output"]["results"]


_PROVIDERS: dict[str, type[HttpReranker]] = {"cohere": CohereReranker, "tei": TeiReranker,
                                             "dashscope": DashScopeReranker}


def make_reranker(config: RerankConfig, *, transport: httpx.BaseTransport | None = None) -> Reranker:
    """The client of `config.provider` (no connection is opened until the first call)."""
    return _PROVIDERS[config.provider](config, transport=transport)
