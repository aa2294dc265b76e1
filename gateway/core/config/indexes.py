"""`[indexes]`: where indexes live, the indexer's document bound, and per-index settings.

Rationale: docs/design-notes.md, "gateway/core/config/indexes.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gateway.core.config.fields import INDEX_NAME, WHITESPACE, UnreadSecret, read_secret, secret_ref, table_of
from gateway.core.errors import ConfigError
from gateway.core.types import Secret
from gateway.core.validate import Fields
from indexes.dense.config import (
    DEFAULT_WEIGHTS,
    FUSIONS,
    LOCAL_MODELS,
    NONE,
    PROVIDERS,
    ApiKey,
    DenseChoices,
    DenseConfig,
    default_dense,
)
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES, DEFAULT_READ_BOUNDS, ReadBounds
from indexes.rerank.config import PROVIDERS as RERANK_PROVIDERS
from indexes.rerank.config import RerankConfig
from indexes.synonyms import SynonymError, Synonyms
from indexes.synonyms import load as load_synonyms

BOUNDS_KEYS = ("max_nesting", "max_markup_elements", "reader_memory_bytes", "reader_cpu_seconds")
INDEXER_KEYS = ("dir", "max_document_bytes", *BOUNDS_KEYS)
DENSE_KEYS = ("provider", "model", "url", "api_key_env", "api_key_file", "dimensions", "query_prefix",
              "passage_prefix", "batch_size", "max_input_chars", "timeout_seconds", "retries", "backoff_seconds",
              "query_timeout_ms", "breaker_failures", "breaker_reset_seconds", "candidates", "fusion", "rrf_k",
              "lexical_weight", "dense_weight", "cache_dir", "threads", "cosine_zero", "cosine_one")
REMOTE_ONLY = ("url", "api_key_env", "api_key_file", "dimensions")
RERANK_KEYS = ("provider", "url", "model", "api_key_env", "api_key_file", "candidates", "timeout_ms",
               "breaker_failures", "breaker_reset_seconds", "max_input_chars")
RERANK_URLS = {"cohere": "https://api.cohere.com/v1/rerank", "tei": "http://127.0.0.1:8080/rerank",
               "dashscope": "https://dashscope.aliyuncs.com/api/v1/services/rerank/text-rerank/text-rerank"}
MAX_PREFIX_CHARS = 200


def parse_indexer(idx: Fields, base_dir: Path) -> tuple[Path, int]:
    """The [indexes] table's own keys: (`dir` resolved against base_dir, `max_document_bytes`).

    Per-index tables (`[indexes.NAME]`) are left to `parse_dense`; any other key is refused,
    naming it. Raises ConfigError.
    """
    for name, value in idx.data.items():
        if name not in INDEXER_KEYS and not isinstance(value, dict):
            raise ConfigError(idx.key(name), "is not a known key (a typo?); per-index settings are tables, "
                                             f"e.g. [indexes.{name}.dense]")
    limit = idx.integer("max_document_bytes", DEFAULT_MAX_DOCUMENT_BYTES, lo=1, hi=2**40)
    parse_read_bounds(idx)  # refused here too
    return base_dir / idx.string("dir", "data/indexes"), limit


def parse_read_bounds(idx: Fields) -> ReadBounds:
    """The [indexes] table's reader bounds (`indexes.ingest.bounds.ReadBounds`): max_nesting
    (levels, 2-10,000), max_markup_elements (1,000-10^9), reader_memory_bytes (64 MiB-1 TiB),
    reader_cpu_seconds (1-3,600). Raises ConfigError naming the key."""
    d = DEFAULT_READ_BOUNDS
    return ReadBounds(
        max_nesting=idx.integer("max_nesting", d.max_nesting, lo=2, hi=10_000),
        max_markup_elements=idx.integer("max_markup_elements", d.max_markup_elements, lo=1000, hi=10**9),
        memory_bytes=idx.integer("reader_memory_bytes", d.memory_bytes, lo=64 * 1024 * 1024, hi=2**40),
        cpu_seconds=idx.integer("reader_cpu_seconds", d.cpu_seconds, lo=1, hi=3600),
    )


def parse_dense(idx: Fields, base_dir: Path, env: Mapping[str, str]) -> DenseChoices:
    """Which indexes are hybrid and with what (`DenseChoices`): one `[indexes.NAME.dense]` table,
    or one line `[indexes.NAME] dense = "MODEL"` (an embedded model, LOCAL_MODELS: provider
    "local", every other key at its default), or `dense = "none"` (lexical), per index; any
    other index is hybrid with the embedded default model when it is new or already has
    vectors (`DenseChoices.for_index`). `[indexes.NAME]` holds `dense`, `rerank`
    (`parse_rerank`) and `synonyms` (`parse_synonyms`). Raises ConfigError naming the key."""
    out: dict[str, DenseConfig] = {}
    lexical: set[str] = set()
    for name, t in index_tables(idx):
        if "dense" not in t:
            continue
        if isinstance(t.data["dense"], str):  # one line: a model, or "none"
            model = t.choice("dense", (*LOCAL_MODELS, NONE))
            if model == NONE:
                lexical.add(name)
            else:
                out[name] = DenseConfig(provider="local", model=model)
        elif isinstance(t.data["dense"], dict):
            out[name] = _dense(t.table("dense"), base_dir, env)
        else:
            t.fail("dense", "type", f'must be "{NONE}", one of {", ".join(LOCAL_MODELS)}, or a table '
                                    f"[indexes.{name}.dense] (deploy/gateway.example.toml)")
    return DenseChoices(out, lexical=frozenset(lexical), default=default_dense())


def parse_rerank(idx: Fields, base_dir: Path, env: Mapping[str, str]) -> dict[str, RerankConfig]:
    """Index name → its rerank stage, one per `[indexes.NAME.rerank]` table (indexes without one
    are not reranked). Only the gateway reads these (a rerank runs at query time): the indexer
    never needs the reranker's API key. Raises ConfigError naming the key; a key's value is
    never echoed."""
    return {name: _rerank(t.table("rerank"), base_dir, env) for name, t in index_tables(idx) if "rerank" in t}


def index_tables(idx: Fields) -> list[tuple[str, Fields]]:
    """(name, table) of each `[indexes.NAME]` table, checked: a valid name, only `dense`,
    `rerank`, `synonyms`, `sources` (`gateway.core.config.sync`) and a backend's keys
    (`gateway.core.config.backends`)."""
    out = []
    for name, raw in idx.data.items():
        if name in INDEXER_KEYS:
            continue
        key = idx.key(name)
        if not INDEX_NAME.fullmatch(name):
            raise ConfigError(key, "index names use letters, digits, '_', '.', '-'")
        t = table_of(raw, key)
        t.only({"dense", "rerank", "synonyms", "sources", "backend", "uri", "token_env", "token_file", "collection",
                "consistency", "timeout_seconds"})  # the engine's keys: gateway.core.config.backends
        out.append((name, t))
    return out


def parse_synonyms(idx: Fields, base_dir: Path) -> dict[str, Synonyms]:
    """Index name → its synonyms, one per `[indexes.NAME] synonyms = "path"` (resolved against
    base_dir; format: indexes.synonyms). Raises ConfigError naming the key, with the file and
    line of a bad rule in the message."""
    out: dict[str, Synonyms] = {}
    for name, t in index_tables(idx):
        if "synonyms" not in t:
            continue
        path = (base_dir / t.string("synonyms")).resolve()
        try:
            out[name] = load_synonyms(path)
        except SynonymError as exc:
            raise ConfigError(t.key("synonyms"), str(exc)) from None
    return out


def _rerank(t: Fields, base_dir: Path, env: Mapping[str, str]) -> RerankConfig:
    """One `[indexes.NAME.rerank]` table → RerankConfig (deploy/gateway.example.toml and
    docs/hybrid-retrieval.md, "Rerank", document each key)."""
    t.only(RERANK_KEYS)
    provider = t.choice("provider", RERANK_PROVIDERS)
    url = t.string("url")
    if not url.startswith(("http://", "https://")) or WHITESPACE.search(url):
        t.fail("url", "format", "must be the http:// or https:// URL of the rerank endpoint, "
                                f"e.g. {RERANK_URLS[provider]}")
    if provider == "tei" and "model" in t:
        t.fail("model", "format", "does not apply to provider 'tei' (a TEI server serves one model)")
    model = "" if provider == "tei" else t.string("model")
    ref = secret_ref(t, "api_key_env", "api_key_file", required=False)
    api_key = _api_key(read_secret(ref[0], ref[1], base_dir, env)) if ref is not None else None
    return RerankConfig(
        provider=provider, url=url, model=model, api_key=api_key,
        candidates=t.integer("candidates", 20, lo=1, hi=500),
        timeout_ms=t.integer("timeout_ms", 500, lo=1, hi=10_000),
        breaker_failures=t.integer("breaker_failures", 3, lo=1, hi=100),
        breaker_reset_seconds=t.number("breaker_reset_seconds", 30.0, lo=0.1, hi=3600.0),
        max_input_chars=t.integer("max_input_chars", 1000, lo=16, hi=100_000),
    )


def _dense(t: Fields, base_dir: Path, env: Mapping[str, str]) -> DenseConfig:
    """One `[indexes.NAME.dense]` table → DenseConfig (deploy/gateway.example.toml documents each key)."""
    t.only(DENSE_KEYS)
    provider = t.choice("provider", PROVIDERS)
    model = t.string("model")
    if provider == "local" and model not in LOCAL_MODELS:
        t.fail("model", "format", f"with provider 'local' must be one of {', '.join(LOCAL_MODELS)}")
    url: str | None = None
    api_key: ApiKey | None = None
    if provider == "openai":
        url = t.string("url")
        if not url.startswith(("http://", "https://")) or WHITESPACE.search(url):
            t.fail("url", "format", "must be the http:// or https:// URL of the embeddings endpoint, "
                                    "e.g. https://ark.cn-beijing.volces.com/api/v3/embeddings")
        ref = secret_ref(t, "api_key_env", "api_key_file", required=False)
        if ref is not None:
            api_key = _api_key(read_secret(ref[0], ref[1], base_dir, env))
    else:
        for k in REMOTE_ONLY:
            if k in t:
                t.fail(k, "format", "applies to provider 'openai' only")
    if provider != "local" and "threads" in t:
        t.fail("threads", "format", "applies to provider 'local' only")
    fusion = t.choice("fusion", FUSIONS, "calibrated")
    default_lexical, default_dense = DEFAULT_WEIGHTS[fusion]
    lexical_weight = t.number("lexical_weight", default_lexical, lo=0.0, hi=100.0)
    dense_weight = t.number("dense_weight", default_dense, lo=0.0, hi=100.0)
    if lexical_weight == 0 and dense_weight == 0:
        t.fail("dense_weight", "range", "and lexical_weight cannot both be 0")
    zero = t.number("cosine_zero", 0.0, lo=-1.0, hi=1.0) if "cosine_zero" in t else None
    one = t.number("cosine_one", 0.0, lo=-1.0, hi=1.0) if "cosine_one" in t else None
    if zero is not None and one is not None and one <= zero:
        t.fail("cosine_one", "range", "must be greater than cosine_zero")
    cache_dir = None
    if "cache_dir" in t:
        ref_dir = Path(t.string("cache_dir"))
        cache_dir = ref_dir if ref_dir.is_absolute() else base_dir / ref_dir
    return DenseConfig(
        provider=provider, model=model, url=url, api_key=api_key,
        dimensions=t.integer("dimensions", 0, lo=1, hi=16_384) if "dimensions" in t else None,
        query_prefix=_prefix(t, "query_prefix"), passage_prefix=_prefix(t, "passage_prefix"),
        batch_size=t.integer("batch_size", 32, lo=1, hi=2048),
        max_input_chars=t.integer("max_input_chars", 2000, lo=16, hi=100_000),
        timeout_seconds=t.number("timeout_seconds", 30.0, lo=0.1, hi=600.0),
        retries=t.integer("retries", 4, lo=0, hi=10),
        backoff_seconds=t.number("backoff_seconds", 0.5, lo=0.0, hi=60.0),
        query_timeout_ms=t.integer("query_timeout_ms", 250, lo=1, hi=10_000),
        breaker_failures=t.integer("breaker_failures", 3, lo=1, hi=100),
        breaker_reset_seconds=t.number("breaker_reset_seconds", 30.0, lo=0.1, hi=3600.0),
        candidates=t.integer("candidates", 100, lo=1, hi=1000),
        fusion=fusion,
        rrf_k=t.integer("rrf_k", 60, lo=1, hi=1000),
        lexical_weight=lexical_weight, dense_weight=dense_weight, cache_dir=cache_dir, cosine_zero=zero, cosine_one=one,
        threads=t.integer("threads", 1, lo=1, hi=64),
    )


def _prefix(t: Fields, name: str) -> str:
    """A query/passage prefix: any string of at most MAX_PREFIX_CHARS characters, "" included
    (the typed `string` getter refuses an empty one)."""
    v = t.data.get(name, "")
    if not isinstance(v, str) or len(v) > MAX_PREFIX_CHARS:
        t.fail(name, "type", f"must be a string of at most {MAX_PREFIX_CHARS} characters")
    return v


def _api_key(secret: Secret) -> ApiKey:
    """An embedding or rerank service's key; empty when the config was loaded without reading
    secrets (such a config never calls the service)."""
    return ApiKey("" if isinstance(secret, UnreadSecret) else secret.reveal())
