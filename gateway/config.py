"""TOML configuration → frozen, validated config objects.

One file configures everything (`deploy/gateway.example.toml` documents each key).
Every problem raises `ConfigError` naming the key, e.g.
"Config 'tenants.acme.secrets[0].value_env' names ACME_SECRET, which is not set."
Relative paths (`indexes.dir`, `value_file`) are resolved against the directory of
the config file, so a config means the same thing whatever the working directory.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError
from gateway.redis_clients import url_problem
from gateway.types import KIB, SECONDS, Secret
from indexes.dense.config import FUSIONS, LOCAL_MODELS, PROVIDERS, ApiKey, DenseConfig
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES
from indexes.search import glob_problem

DEFAULT_TOLERANCE = 3600 * SECONDS  # seed 003: |now - timestamp| must not exceed 3600 s
# A callback signing key shorter than this is refused: one captured request lets anyone test
# candidate keys offline against its HMAC, and a short key falls to that search.
MIN_SECRET_CHARS = 16
_TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_INDEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_WHITESPACE = re.compile(r"\s")
# The gateway's own endpoints: a tenant's callback path may not shadow them.
RESERVED_PATHS = ("/healthz", "/readyz", "/metrics", "/admin/", "/agent-api/", "/agent-access/")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class SecretKey:
    """One signing key of a tenant.

    id: key id shown in logs and audit (never the value).
    value: the HMAC key. not_after: unix seconds after which the key no longer
    verifies, or None. source: 'env:NAME' or 'file:PATH' for reloading.
    """

    id: str
    value: Secret
    not_after: float | None = None
    source: str = ""

    def live(self, now: float) -> bool:
        """True while the key may verify requests (now: unix seconds)."""
        return self.not_after is None or now <= self.not_after


@dataclass(frozen=True, slots=True)
class Route:
    """(FirstLevelId, SecondLevelId) → index plus optional filter (seed 003 "Body")."""

    first_level_id: str
    second_level_id: str
    index: str
    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Tenant:
    """A Volcengine agent account calling one callback path.

    verify: 'enforce' rejects unsigned/badly signed requests; 'report' answers them
    and records the outcome (for the console's connectivity test before a key exists).
    """

    name: str
    path: str
    verify: str
    secrets: tuple[SecretKey, ...]
    routes: tuple[Route, ...]

    def route(self, first: str, second: str) -> Route | None:
        for r in self.routes:
            if r.first_level_id == first and r.second_level_id == second:
                return r
        return None


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """The listener. Sizes in bytes, durations in seconds.

    body_timeout_seconds: a request body must arrive within this (else 408).
    keep_alive_seconds: a connection with no request in progress (idle between requests, or
        still sending a request's headers) is closed after this; hypercorn has no separate
        header timeout, so this is what bounds a client trickling headers.
    """

    bind: str = "127.0.0.1:8080"
    workers: int = 1
    max_body_bytes: int = 64 * KIB
    body_timeout_seconds: float = 10.0
    graceful_timeout: float = 10.0
    keep_alive_seconds: float = 10.0


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """redis_url None → in-process nonce store (one worker only)."""

    redis_url: str | None = None
    tolerance_seconds: int = DEFAULT_TOLERANCE
    timeout_seconds: float = 1.0
    key_prefix: str = "kbgate"


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Limits of the callback's search. chars are Unicode characters, not bytes."""

    default_limit: int = 5
    max_limit: int = 20
    max_query_chars: int = 512
    max_level_id_chars: int = 128
    summary_chars: int = 200
    content_chars: int = 1500
    one_per_document: bool = True


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """The operators' view: `/admin/` deliveries page and the deliveries record.

    token_sha256: lower-case hex SHA-256 of the admin token (the token itself is never
        stored); None disables `/admin/` (404).
    show_queries: keep and show the callback's Query text (off: query text is personal data).
    keep_deliveries: ring size per tenant of the deliveries record (entries).
    """

    token_sha256: str | None = None
    show_queries: bool = False
    keep_deliveries: int = 200


@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration. `source` is the file it came from (or None)."""

    server: ServerConfig
    replay: ReplayConfig
    indexes_dir: Path
    search: SearchConfig
    tenants: Mapping[str, Tenant]
    source: Path | None = None
    log_level: str = "info"
    paths: Mapping[str, str] = field(default_factory=dict)
    admin: AdminConfig = AdminConfig()
    agent: AgentConfig = field(default_factory=lambda: AgentConfig())
    audit: AuditConfig = field(default_factory=lambda: AuditConfig())
    access: AccessConfig = field(default_factory=lambda: AccessConfig())
    dense: Mapping[str, DenseConfig] = field(default_factory=dict)

    def tenant_at(self, path: str) -> Tenant | None:
        """The tenant whose callback path is `path` (exact match), or None."""
        name = self.paths.get(path)
        return self.tenants[name] if name is not None else None


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Config:
    """Read and validate a TOML config file.

    Raises ConfigError (naming the key) for an unreadable file, bad TOML, unknown or
    ill-typed keys, empty or whitespace-carrying secrets, unset env vars, duplicate paths.
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be read: {exc.strerror}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("<file>", f"is not valid TOML: {exc}") from None
    return parse_config(data, base_dir=p.resolve().parent, env=env, source=p.resolve())


def load_indexes_dir(path: str | os.PathLike[str]) -> Path:
    """Only `indexes.dir` of a config file, resolved against the file's folder.

    For the indexer (`kbgate index ...`), which must not need the gateway's secrets in its
    environment. Raises ConfigError for an unreadable or invalid file or key.
    """
    return load_indexer_config(path)[0]


def load_indexer_config(path: str | os.PathLike[str]) -> tuple[Path, int]:
    """(`indexes.dir` resolved against the file's folder, `indexes.max_document_bytes`):
    what `kbgate index add` reads, like `load_indexes_dir`."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("<file>", f"is not valid TOML: {exc}") from None
    return _indexer(data, p.resolve().parent)


def load_indexes(path: str | os.PathLike[str], env: Mapping[str, str] | None = None,
                 ) -> tuple[Path, dict[str, DenseConfig]]:
    """`indexes.dir` (resolved against the file's folder) and the hybrid settings of each index
    (`[indexes.<name>.dense]`), and nothing else of the file.

    For the indexer (`kbgate index add`), which must not need the gateway's secrets in its
    environment: only an embedding service's API key, when one is configured, is read.
    Raises ConfigError for an unreadable or invalid file or key.
    """
    p = Path(path)
    try:
        data = tomllib.loads(p.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be read: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("<file>", f"is not valid TOML: {exc}") from None
    base = p.resolve().parent
    return _indexer(data, base)[0], _indexes_dense(_table(data, "indexes"), base, os.environ if env is None else env)


def _indexer(data: Mapping[str, Any], base_dir: Path) -> tuple[Path, int]:
    idx = _table(data, "indexes")
    # Tables are per-index settings ([indexes.<name>.dense]), validated by _indexes_dense.
    _only({k: v for k, v in idx.items() if not isinstance(v, dict)}, "indexes", {"dir", "max_document_bytes"})
    limit = _int(idx, "indexes", "max_document_bytes", DEFAULT_MAX_DOCUMENT_BYTES, lo=1, hi=2**40)
    return base_dir / _str(idx, "indexes", "dir", "data/indexes"), limit


def parse_config(
    data: Mapping[str, Any],
    *,
    base_dir: Path,
    env: Mapping[str, str] | None = None,
    source: Path | None = None,
) -> Config:
    """Validate a parsed TOML document (see `load_config`)."""
    env = os.environ if env is None else env
    _only(data, "", {"server", "replay", "indexes", "search", "tenants", "log", "admin", "agent", "audit", "access"})
    server = _server(_table(data, "server"))
    replay = _replay(_table(data, "replay"))
    if server.workers > 1 and replay.redis_url is None:
        raise ConfigError(
            "server.workers",
            f"is {server.workers}, but the in-process replay store serves one worker only; "
            "set replay.redis_url to share nonces between workers",
        )
    indexes_dir = _indexer(data, base_dir)[0]  # max_document_bytes is the indexer's; checked here too
    dense = _indexes_dense(_table(data, "indexes"), base_dir, env)
    search = _search(_table(data, "search"))
    log = _table(data, "log")
    _only(log, "log", {"level"})
    log_level = _str(log, "log", "level", "info")
    if log_level not in {"debug", "info", "warning", "error"}:
        raise ConfigError("log.level", "must be one of debug, info, warning, error")
    tenants_raw = _table(data, "tenants")
    tenants: dict[str, Tenant] = {}
    paths: dict[str, str] = {}
    for name, t in tenants_raw.items():
        key = f"tenants.{name}"
        if not _TENANT_NAME.fullmatch(name):
            raise ConfigError(key, "tenant names use letters, digits, '_', '.', '-'")
        if not isinstance(t, dict):
            raise ConfigError(key, "must be a table")
        tenant = _tenant(name, t, base_dir, env, search.max_level_id_chars)
        if tenant.path in paths:
            raise ConfigError(f"{key}.path", f"repeats the path of tenants.{paths[tenant.path]}")
        paths[tenant.path] = name
        tenants[name] = tenant
    agent = _agent(_table(data, "agent"), base_dir, env, tenants)
    audit = _audit(_table(data, "audit"), base_dir)
    access = _access(_table(data, "access"), base_dir, env)
    return Config(
        server=server,
        replay=replay,
        indexes_dir=indexes_dir,
        search=search,
        tenants=tenants,
        source=source,
        log_level=log_level,
        paths=paths,
        admin=_admin(_table(data, "admin")),
        agent=agent,
        audit=audit,
        access=access,
        dense=dense,
    )


def read_secret(source: str, key: str, base_dir: Path, env: Mapping[str, str]) -> Secret:
    """Read a secret from 'env:NAME' or 'file:PATH'; validate it (non-empty, no whitespace).

    A single trailing newline of a file is dropped (files written by `echo`).
    Raises ConfigError naming `key`; the message never contains the value.
    """
    kind, _, ref = source.partition(":")
    if kind == "env":
        if ref not in env:
            raise ConfigError(key, f"names {ref}, which is not set")
        value = env[ref]
    else:
        fp = Path(ref) if Path(ref).is_absolute() else base_dir / ref
        try:
            value = fp.read_text("utf-8")
        except FileNotFoundError:
            raise ConfigError(key, f"names file {ref}, which does not exist") from None
        except (OSError, UnicodeDecodeError):
            raise ConfigError(key, f"names file {ref}, which cannot be read as UTF-8") from None
        if value.endswith("\r\n"):
            value = value[:-2]
        elif value.endswith("\n"):
            value = value[:-1]
    if not value:
        raise ConfigError(key, "gives an empty secret")
    if _WHITESPACE.search(value):
        raise ConfigError(key, "gives a secret containing whitespace")
    return Secret(value)


def read_signing_key(source: str, key: str, base_dir: Path, env: Mapping[str, str]) -> Secret:
    """A tenant's HMAC signing key: `read_secret`, then at least MIN_SECRET_CHARS characters.

    Raises ConfigError naming `key` (never the value, nor its length).
    """
    value = read_secret(source, key, base_dir, env)
    if len(value.reveal()) < MIN_SECRET_CHARS:
        raise ConfigError(key, f"gives a signing key shorter than {MIN_SECRET_CHARS} characters; use a longer one "
                          "(`kbgate secrets add` generates 43)")
    return value


# ---------------------------------------------------------------- sections


def _server(t: Mapping[str, Any]) -> ServerConfig:
    _only(t, "server", {"bind", "workers", "max_body_bytes", "body_timeout_seconds", "graceful_timeout",
                        "keep_alive_seconds"})
    bind = _str(t, "server", "bind", "127.0.0.1:8080")
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("server.bind", "must be HOST:PORT, e.g. 127.0.0.1:8080")
    return ServerConfig(
        bind=bind,
        workers=_int(t, "server", "workers", 1, lo=1, hi=64),
        max_body_bytes=_int(t, "server", "max_body_bytes", 64 * KIB, lo=256, hi=16 * 1024 * KIB),
        body_timeout_seconds=_num(t, "server", "body_timeout_seconds", 10.0, lo=0.1, hi=300.0),
        graceful_timeout=_num(t, "server", "graceful_timeout", 10.0, lo=0.0, hi=600.0),
        keep_alive_seconds=_num(t, "server", "keep_alive_seconds", 10.0, lo=1.0, hi=300.0),
    )


def _replay(t: Mapping[str, Any]) -> ReplayConfig:
    _only(t, "replay", {"redis_url", "tolerance_seconds", "timeout_seconds", "key_prefix"})
    url = t.get("redis_url")
    problem = None if url is None else url_problem(url)
    if problem is not None:
        raise ConfigError("replay.redis_url", problem)
    return ReplayConfig(
        redis_url=url or None,
        tolerance_seconds=_int(t, "replay", "tolerance_seconds", DEFAULT_TOLERANCE, lo=1, hi=DEFAULT_TOLERANCE),
        timeout_seconds=_num(t, "replay", "timeout_seconds", 1.0, lo=0.05, hi=10.0),
        key_prefix=_str(t, "replay", "key_prefix", "kbgate"),
    )


def _search(t: Mapping[str, Any]) -> SearchConfig:
    s = "search"
    _only(t, s, set(SearchConfig.__dataclass_fields__))
    max_limit = _int(t, s, "max_limit", 20, lo=1, hi=100)
    one = t.get("one_per_document", True)
    if not isinstance(one, bool):
        raise ConfigError("search.one_per_document", "must be true or false")
    return SearchConfig(
        default_limit=_int(t, s, "default_limit", min(5, max_limit), lo=1, hi=max_limit),
        max_limit=max_limit,
        max_query_chars=_int(t, s, "max_query_chars", 512, lo=1, hi=8192),
        max_level_id_chars=_int(t, s, "max_level_id_chars", 128, lo=1, hi=1024),
        summary_chars=_int(t, s, "summary_chars", 200, lo=20, hi=4000),
        content_chars=_int(t, s, "content_chars", 1500, lo=50, hi=100_000),
        one_per_document=one,
    )


def _admin(t: Mapping[str, Any]) -> AdminConfig:
    _only(t, "admin", {"token_sha256", "show_queries", "keep_deliveries"})
    digest = t.get("token_sha256")
    if digest is not None and (not isinstance(digest, str) or not _SHA256_HEX.fullmatch(digest)):
        # Never echo the value: an operator may have pasted the token itself here.
        raise ConfigError("admin.token_sha256", "must be 64 lower-case hex characters: the SHA-256 of the "
                          "admin token, not the token (kbgate admin-token prints both)")
    show = t.get("show_queries", False)
    if not isinstance(show, bool):
        raise ConfigError("admin.show_queries", "must be true or false")
    return AdminConfig(digest, show, _int(t, "admin", "keep_deliveries", 200, lo=1, hi=10_000))


def _tenant(name: str, t: Mapping[str, Any], base_dir: Path, env: Mapping[str, str], max_id_chars: int) -> Tenant:
    key = f"tenants.{name}"
    _only(t, key, {"path", "verify", "secrets", "routes"})
    path = _str(t, key, "path", f"/volcengine/{name}")
    if not path.startswith("/") or _WHITESPACE.search(path) or "?" in path or "#" in path:
        raise ConfigError(f"{key}.path", "must be an absolute URL path like /volcengine/acme")
    if any(path == p.rstrip("/") or path.startswith(p) for p in RESERVED_PATHS):
        raise ConfigError(f"{key}.path", f"{path} is one of the gateway's own endpoints")
    verify = _str(t, key, "verify", "enforce")
    if verify not in {"enforce", "report"}:
        raise ConfigError(f"{key}.verify", "must be 'enforce' or 'report'")
    secrets_raw = t.get("secrets", [])
    if not isinstance(secrets_raw, list):
        raise ConfigError(f"{key}.secrets", "must be an array of tables ([[...secrets]])")
    secrets: list[SecretKey] = []
    for i, s in enumerate(secrets_raw):
        skey = f"{key}.secrets[{i}]"
        if not isinstance(s, dict):
            raise ConfigError(skey, "must be a table")
        _only(s, skey, {"id", "value_env", "value_file", "not_after"})
        kid = _str(s, skey, "id", None)
        if not _KEY_ID.fullmatch(kid):
            raise ConfigError(f"{skey}.id", "uses letters, digits, '_', '.', ':', '-'")
        if any(k.id == kid for k in secrets):
            raise ConfigError(f"{skey}.id", f"repeats key id {kid!r}")
        has_env, has_file = "value_env" in s, "value_file" in s
        if has_env == has_file:
            raise ConfigError(skey, "needs exactly one of value_env or value_file")
        if has_env:
            source = "env:" + _str(s, skey, "value_env", None)
            value = read_signing_key(source, f"{skey}.value_env", base_dir, env)
        else:
            ref = _str(s, skey, "value_file", None)
            fp = Path(ref) if Path(ref).is_absolute() else base_dir / ref
            source = f"file:{fp}"
            value = read_signing_key(source, f"{skey}.value_file", base_dir, env)
        secrets.append(SecretKey(kid, value, _instant(s.get("not_after"), f"{skey}.not_after"), source))
    if verify == "enforce" and not secrets:
        raise ConfigError(f"{key}.secrets", "is empty, but verify = 'enforce' needs at least one key")
    routes_raw = t.get("routes", [])
    if not isinstance(routes_raw, list):
        raise ConfigError(f"{key}.routes", "must be an array of tables ([[...routes]])")
    routes: list[Route] = []
    for i, r in enumerate(routes_raw):
        rkey = f"{key}.routes[{i}]"
        if not isinstance(r, dict):
            raise ConfigError(rkey, "must be a table")
        _only(r, rkey, {"first_level_id", "second_level_id", "index", "datasets", "path_globs"})
        route = Route(
            first_level_id=_str(r, rkey, "first_level_id", None),
            second_level_id=_str(r, rkey, "second_level_id", None),
            index=_str(r, rkey, "index", None),
            datasets=_strs(r, rkey, "datasets"),
            path_globs=_globs(r, rkey, "path_globs"),
        )
        for field_name in ("first_level_id", "second_level_id"):
            value = getattr(route, field_name)
            if value != value.strip():
                raise ConfigError(f"{rkey}.{field_name}", "has leading or trailing whitespace")
            if len(value) > max_id_chars:
                raise ConfigError(f"{rkey}.{field_name}", f"is longer than search.max_level_id_chars "
                                  f"({max_id_chars}): no request could reach it")
        if not _INDEX_NAME.fullmatch(route.index):
            raise ConfigError(f"{rkey}.index", "uses letters, digits, '_', '.', '-'")
        if any(
            (x.first_level_id, x.second_level_id) == (route.first_level_id, route.second_level_id)
            for x in routes
        ):
            raise ConfigError(rkey, "repeats an earlier (first_level_id, second_level_id) pair")
        routes.append(route)
    return Tenant(name, path, verify, tuple(secrets), tuple(routes))


def _indexes_dense(idx: Mapping[str, Any], base_dir: Path, env: Mapping[str, str]) -> dict[str, DenseConfig]:
    """`[indexes]`: `dir`, and one `[indexes.<name>]` table per index with settings, whose only
    key today is the `dense` table (hybrid retrieval, opt-in per index)."""
    out: dict[str, DenseConfig] = {}
    for name, t in idx.items():
        if name in ("dir", "max_document_bytes"):
            continue
        key = f"indexes.{name}"
        if not isinstance(t, dict):
            raise ConfigError(key, "is not a known key (a typo?); per-index settings are tables, "
                              f"e.g. [indexes.{name}.dense]")
        if not _INDEX_NAME.fullmatch(name):
            raise ConfigError(key, "index names use letters, digits, '_', '.', '-'")
        _only(t, key, {"dense"})
        if "dense" in t:
            if not isinstance(t["dense"], dict):
                raise ConfigError(f"{key}.dense", "must be a table")
            out[name] = _dense(t["dense"], f"{key}.dense", base_dir, env)
    return out


def _dense(t: Mapping[str, Any], key: str, base_dir: Path, env: Mapping[str, str]) -> DenseConfig:
    """One `[indexes.<name>.dense]` table → DenseConfig (deploy/gateway.example.toml documents
    each key). Every problem names its key; an API key's value is never echoed."""
    _only(t, key, {"provider", "model", "url", "api_key_env", "api_key_file", "dimensions", "query_prefix",
                   "passage_prefix", "batch_size", "max_input_chars", "timeout_seconds", "retries",
                   "backoff_seconds", "query_timeout_ms", "breaker_failures", "breaker_reset_seconds",
                   "candidates", "fusion", "rrf_k", "lexical_weight", "dense_weight", "cache_dir", "threads"})
    provider = _str(t, key, "provider", None)
    if provider not in PROVIDERS:
        raise ConfigError(f"{key}.provider", f"must be one of {', '.join(repr(p) for p in PROVIDERS)}")
    model = _str(t, key, "model", None)
    if provider == "local" and model not in LOCAL_MODELS:
        raise ConfigError(f"{key}.model", f"with provider 'local' must be one of {', '.join(LOCAL_MODELS)}")
    remote_only = ("url", "api_key_env", "api_key_file", "dimensions")
    url: str | None = None
    api_key: ApiKey | None = None
    if provider == "openai":
        url = _str(t, key, "url", None)
        if not url.startswith(("http://", "https://")) or _WHITESPACE.search(url):
            raise ConfigError(f"{key}.url", "must be the http:// or https:// URL of the embeddings endpoint, "
                              "e.g. https://ark.cn-beijing.volces.com/api/v3/embeddings")
        if "api_key_env" in t and "api_key_file" in t:
            raise ConfigError(key, "takes at most one of api_key_env or api_key_file")
        if "api_key_env" in t:
            api_key = ApiKey(read_secret("env:" + _str(t, key, "api_key_env", None), f"{key}.api_key_env",
                                         base_dir, env).reveal())
        elif "api_key_file" in t:
            api_key = ApiKey(read_secret("file:" + _str(t, key, "api_key_file", None), f"{key}.api_key_file",
                                         base_dir, env).reveal())
    else:
        for k in remote_only:
            if k in t:
                raise ConfigError(f"{key}.{k}", "applies to provider 'openai' only")
    if provider != "local" and "threads" in t:
        raise ConfigError(f"{key}.threads", "applies to provider 'local' only")
    fusion = _str(t, key, "fusion", "mix")
    if fusion not in FUSIONS:
        raise ConfigError(f"{key}.fusion", f"must be one of {', '.join(repr(f) for f in FUSIONS)}")
    prefixes = {}
    for k in ("query_prefix", "passage_prefix"):
        v = t.get(k, "")
        if not isinstance(v, str) or len(v) > 200:
            raise ConfigError(f"{key}.{k}", "must be a string of at most 200 characters")
        prefixes[k] = v
    lexical_weight = _num(t, key, "lexical_weight", 0.7, lo=0.0, hi=100.0)
    dense_weight = _num(t, key, "dense_weight", 0.3, lo=0.0, hi=100.0)
    if lexical_weight == 0 and dense_weight == 0:
        raise ConfigError(f"{key}.dense_weight", "and lexical_weight cannot both be 0")
    cache_dir = None
    if "cache_dir" in t:
        ref = Path(_str(t, key, "cache_dir", None))
        cache_dir = ref if ref.is_absolute() else base_dir / ref
    return DenseConfig(
        provider=provider, model=model, url=url, api_key=api_key,
        dimensions=_int(t, key, "dimensions", 0, lo=1, hi=16_384) if "dimensions" in t else None,
        query_prefix=prefixes["query_prefix"], passage_prefix=prefixes["passage_prefix"],
        batch_size=_int(t, key, "batch_size", 32, lo=1, hi=2048),
        max_input_chars=_int(t, key, "max_input_chars", 2000, lo=16, hi=100_000),
        timeout_seconds=_num(t, key, "timeout_seconds", 30.0, lo=0.1, hi=600.0),
        retries=_int(t, key, "retries", 4, lo=0, hi=10),
        backoff_seconds=_num(t, key, "backoff_seconds", 0.5, lo=0.0, hi=60.0),
        query_timeout_ms=_int(t, key, "query_timeout_ms", 250, lo=1, hi=10_000),
        breaker_failures=_int(t, key, "breaker_failures", 3, lo=1, hi=100),
        breaker_reset_seconds=_num(t, key, "breaker_reset_seconds", 30.0, lo=0.1, hi=3600.0),
        candidates=_int(t, key, "candidates", 50, lo=1, hi=1000),
        fusion=fusion, rrf_k=_int(t, key, "rrf_k", 60, lo=1, hi=1000),
        lexical_weight=lexical_weight, dense_weight=dense_weight, cache_dir=cache_dir,
        threads=_int(t, key, "threads", 1, lo=1, hi=64),
    )


# ---------------------------------------------------------------- typed getters


def _only(t: Mapping[str, Any], key: str, allowed: set[str]) -> None:
    for k in t:
        if k not in allowed:
            where = f"{key}.{k}" if key else k
            raise ConfigError(where, "is not a known key (a typo?)")


def _table(t: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    v = t.get(key, {})
    if not isinstance(v, dict):
        raise ConfigError(key, "must be a table")
    return v


def _str(t: Mapping[str, Any], table: str, key: str, default: str | None) -> str:
    if key not in t:
        if default is None:
            raise ConfigError(f"{table}.{key}", "is required")
        return default
    v = t[key]
    if not isinstance(v, str) or not v:
        raise ConfigError(f"{table}.{key}", "must be a non-empty string")
    return v


def _strs(t: Mapping[str, Any], table: str, key: str) -> tuple[str, ...] | None:
    if key not in t:
        return None
    v = t[key]
    if not isinstance(v, list) or not v or not all(isinstance(x, str) and x for x in v):
        raise ConfigError(f"{table}.{key}", "must be a non-empty array of non-empty strings")
    return tuple(v)


def _globs(t: Mapping[str, Any], table: str, key: str) -> tuple[str, ...] | None:
    """Like _strs, and every glob must be usable as a path filter (indexes.search.glob_problem)."""
    globs = _strs(t, table, key)
    for i, g in enumerate(globs or ()):
        problem = glob_problem(g)
        if problem:
            raise ConfigError(f"{table}.{key}[{i}]", problem)
    return globs


def _int(t: Mapping[str, Any], table: str, key: str, default: int, *, lo: int, hi: int) -> int:
    v = t.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(f"{table}.{key}", f"must be an integer from {lo} to {hi}")
    return v


def _num(t: Mapping[str, Any], table: str, key: str, default: float, *, lo: float, hi: float) -> float:
    v = t.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or not lo <= v <= hi:
        raise ConfigError(f"{table}.{key}", f"must be a number from {lo} to {hi}")
    return float(v)


def _instant(v: Any, key: str) -> float | None:
    """TOML offset datetime, date, or unix seconds → unix seconds; None stays None."""
    if v is None:
        return None
    if isinstance(v, bool):
        raise ConfigError(key, "must be a date-time (2026-12-31T00:00:00Z) or unix seconds")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            raise ConfigError(key, "needs a UTC offset, e.g. 2026-12-31T00:00:00Z")
        return v.timestamp()
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC).timestamp()
    raise ConfigError(key, "must be a date-time (2026-12-31T00:00:00Z) or unix seconds")


# ================================================================ agent endpoints
#
# [agent]                      ref_key_env | ref_key_file (the master key of refs/cursors)
# [agent.routes.NAME]          index, datasets?, path_globs?, enabled, min_score
# [agent.clients.ID]           routes, indexes?, datasets, path_globs, tools, include_working_docs
# [[agent.clients.ID.tokens]]  id, sha256 (hex SHA-256 of the Bearer token; the token itself
#                              is never stored)
# [audit]                      sink = "stdout" | "file" | "off", path (for "file")
#
# Policies deny by default (seed 002 §13 "默认拒绝未声明工具、路径和 dataset"): a client
# must name its routes, tools, datasets and path globs; "*" in datasets and "**" in
# path_globs are the explicit "all".

# Agent Access tool API (seed 002 §7); 'get_page.full_text' lets get_page return whole text.
ACCESS_TOOLS = ("search", "ask", "get_page", "get_page.full_text", "get_context", "create_feedback",
                "create_improvement_task")
AGENT_TOOLS = frozenset({"knowledge.search", "knowledge.read", *ACCESS_TOOLS})
_ROUTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True, slots=True)
class AgentRoute:
    """A workspace route of the agent API: name → one index plus the route's own filter.

    datasets / path_globs: None = no restriction by the route (the client policy still
    applies). enabled: False answers search with status 'disabled'. min_score: hits below
    this BM25 score are dropped, never lowered to fill a list (seed 000 "独立搜索").
    """

    name: str
    index: str
    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    enabled: bool = True
    min_score: float = 0.0


@dataclass(frozen=True, slots=True)
class AgentToken:
    """One Bearer token of a client: id (shown in audit) and the SHA-256 hex of the token."""

    id: str
    sha256: str


@dataclass(frozen=True, slots=True)
class AgentPolicy:
    """What one agent client may see (seed 002 §8).

    routes: agent route names. indexes: None = whatever its routes map to, else a
    whitelist. datasets: None = all ("*"). path_globs: ("**",) = all. tools: names from
    AGENT_TOOLS. include_working_docs: may the client see working docs
    (`gateway.scope.WORKING_DOCS`; default False).
    """

    routes: tuple[str, ...]
    tools: tuple[str, ...]
    path_globs: tuple[str, ...]
    datasets: tuple[str, ...] | None = None
    indexes: tuple[str, ...] | None = None
    include_working_docs: bool = False


@dataclass(frozen=True, slots=True)
class AgentClient:
    id: str
    tokens: tuple[AgentToken, ...]
    policy: AgentPolicy


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The agent section. ref_key: master key of refs and cursors (None when no client)."""

    routes: Mapping[str, AgentRoute] = field(default_factory=dict)
    clients: Mapping[str, AgentClient] = field(default_factory=dict)
    ref_key: Secret | None = None


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """sink: 'stdout' | 'file' | 'off'; path: the JSON-lines file for 'file'."""

    sink: str = "stdout"
    path: Path | None = None


def _agent(t: Mapping[str, Any], base_dir: Path, env: Mapping[str, str],
           tenants: Mapping[str, Tenant]) -> AgentConfig:
    _only(t, "agent", {"ref_key_env", "ref_key_file", "routes", "clients"})
    routes: dict[str, AgentRoute] = {}
    for name, r in _table(t, "routes").items():
        key = f"agent.routes.{name}"
        if not _ROUTE_NAME.fullmatch(name):
            raise ConfigError(key, "route names use letters, digits, '_', '.', '-'")
        if not isinstance(r, dict):
            raise ConfigError(key, "must be a table")
        _only(r, key, {"index", "datasets", "path_globs", "enabled", "min_score"})
        index = _str(r, key, "index", None)
        if not _INDEX_NAME.fullmatch(index):
            raise ConfigError(f"{key}.index", "uses letters, digits, '_', '.', '-'")
        enabled = r.get("enabled", True)
        if not isinstance(enabled, bool):
            raise ConfigError(f"{key}.enabled", "must be true or false")
        routes[name] = AgentRoute(name, index, _strs(r, key, "datasets"), _globs(r, key, "path_globs"),
                                  enabled, _num(r, key, "min_score", 0.0, lo=0.0, hi=1e6))
    clients: dict[str, AgentClient] = {}
    seen_hashes: dict[str, str] = {}
    for cid, c in _table(t, "clients").items():
        key = f"agent.clients.{cid}"
        if not _CLIENT_ID.fullmatch(cid):
            raise ConfigError(key, "client ids use letters, digits, '_', '.', ':', '-'")
        if not isinstance(c, dict):
            raise ConfigError(key, "must be a table")
        _only(c, key, {"tokens", "routes", "indexes", "datasets", "path_globs", "tools",
                       "include_working_docs"})
        tokens = _agent_tokens(c.get("tokens"), key, seen_hashes)
        policy_routes = _required_strs(c, key, "routes")
        for rn in policy_routes:
            if rn not in routes:
                raise ConfigError(f"{key}.routes", f"names route {rn!r}, which is not in agent.routes")
        tools = _required_strs(c, key, "tools")
        for tool in tools:
            if tool not in AGENT_TOOLS:
                raise ConfigError(f"{key}.tools", f"names unknown tool {tool!r}; known: {sorted(AGENT_TOOLS)}")
        datasets = _required_strs(c, key, "datasets")
        working = c.get("include_working_docs", False)
        if not isinstance(working, bool):
            raise ConfigError(f"{key}.include_working_docs", "must be true or false")
        policy = AgentPolicy(
            routes=policy_routes,
            tools=tools,
            path_globs=_required_globs(c, key, "path_globs"),
            datasets=None if "*" in datasets else datasets,
            indexes=_strs(c, key, "indexes"),
            include_working_docs=working,
        )
        clients[cid] = AgentClient(cid, tokens, policy)
    ref_key: Secret | None = None
    has_env, has_file = "ref_key_env" in t, "ref_key_file" in t
    if has_env and has_file:
        raise ConfigError("agent", "needs at most one of ref_key_env or ref_key_file")
    if has_env or has_file:
        k = "agent.ref_key_env" if has_env else "agent.ref_key_file"
        ref = _str(t, "agent", k.split(".")[1], None)
        ref_key = read_secret(("env:" if has_env else "file:") + ref, k, base_dir, env)
        if len(ref_key.reveal()) < 32:
            raise ConfigError(k, "gives a key shorter than 32 characters")
        for tenant in tenants.values():
            for s in tenant.secrets:
                if s.value == ref_key:
                    raise ConfigError(k, f"equals the webhook secret tenants.{tenant.name} key "
                                         f"{s.id!r}; the ref key must be its own")
    elif clients:
        raise ConfigError("agent.ref_key_env", "is required (or agent.ref_key_file) when agent clients exist")
    return AgentConfig(routes, clients, ref_key)


def _agent_tokens(raw: Any, key: str, seen: dict[str, str]) -> tuple[AgentToken, ...]:
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{key}.tokens", "must be a non-empty array of tables ([[...tokens]])")
    out: list[AgentToken] = []
    for i, tk in enumerate(raw):
        tkey = f"{key}.tokens[{i}]"
        if not isinstance(tk, dict):
            raise ConfigError(tkey, "must be a table")
        _only(tk, tkey, {"id", "sha256"})
        tid = _str(tk, tkey, "id", None)
        if not _KEY_ID.fullmatch(tid) or any(x.id == tid for x in out):
            raise ConfigError(f"{tkey}.id", "must be a unique id of letters, digits, '_', '.', ':', '-'")
        digest = _str(tk, tkey, "sha256", None)
        if not _SHA256_HEX.fullmatch(digest):
            raise ConfigError(f"{tkey}.sha256", "must be 64 lower-case hex digits (SHA-256 of the token)")
        if digest in seen:
            raise ConfigError(f"{tkey}.sha256", f"repeats a token hash of {seen[digest]}")
        seen[digest] = tkey
        out.append(AgentToken(tid, digest))
    return tuple(out)


def _required_globs(t: Mapping[str, Any], table: str, key: str) -> tuple[str, ...]:
    v = _globs(t, table, key)
    if v is None:
        raise ConfigError(f"{table}.{key}", "is required (policies deny what they do not name)")
    return v


def _required_strs(t: Mapping[str, Any], table: str, key: str) -> tuple[str, ...]:
    v = _strs(t, table, key)
    if v is None:
        raise ConfigError(f"{table}.{key}", "is required (policies deny what they do not name)")
    return v


def _audit(t: Mapping[str, Any], base_dir: Path) -> AuditConfig:
    _only(t, "audit", {"sink", "path"})
    sink = _str(t, "audit", "sink", "stdout")
    if sink not in {"stdout", "file", "off"}:
        raise ConfigError("audit.sink", "must be 'stdout', 'file' or 'off'")
    if sink == "file":
        return AuditConfig(sink, base_dir / _str(t, "audit", "path", None))
    if "path" in t:
        raise ConfigError("audit.path", "is only used with sink = 'file'")
    return AuditConfig(sink)


# ================================================================ agent access tools
#
# [access]          tracker = "sqlite" | "github", sqlite_path, idempotency_ttl_seconds,
#                   dedupe_ttl_seconds, labels, page_max_bytes, context_max_pages,
#                   context_max_bytes_per_page, context_max_total_bytes
# [access.github]   repo = "owner/name", token_env | token_file, api_url, map_path
# [access.answer]   url (an upstream Answer API; absent → extractive answers), timeout_seconds
# Retention of idempotency records: seed 002 §16 leaves it open; 24 h by default.

_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")


@dataclass(frozen=True, slots=True)
class AccessConfig:
    """The Agent Access tool API (seed 002). Durations in seconds, sizes in UTF-8 bytes.

    tracker: 'sqlite' (embedded default, works without GitHub) or 'github'.
    github_token: only for 'github'. answer_url: None → extractive `ask`.
    """

    tracker: str = "sqlite"
    sqlite_path: Path = Path("data/feedback.sqlite3")
    idempotency_ttl_seconds: int = 24 * 3600 * SECONDS
    dedupe_ttl_seconds: int = 7 * 24 * 3600 * SECONDS
    labels: tuple[str, ...] = ("kbgate",)
    page_max_bytes: int = 8 * KIB
    context_max_pages: int = 5
    context_max_bytes_per_page: int = 2 * KIB
    context_max_total_bytes: int = 8 * KIB
    github_repo: str | None = None
    github_token: Secret | None = None
    github_api_url: str = "https://api.github.com"
    github_map_path: Path = Path("data/github-issue-map.sqlite3")
    answer_url: str | None = None
    answer_timeout_seconds: float = 10.0


def _access(t: Mapping[str, Any], base_dir: Path, env: Mapping[str, str]) -> AccessConfig:
    k = "access"
    _only(t, k, {"tracker", "sqlite_path", "idempotency_ttl_seconds", "dedupe_ttl_seconds", "labels",
                 "page_max_bytes", "context_max_pages", "context_max_bytes_per_page", "context_max_total_bytes",
                 "github", "answer"})
    tracker = _str(t, k, "tracker", "sqlite")
    if tracker not in {"sqlite", "github"}:
        raise ConfigError("access.tracker", "must be 'sqlite' or 'github'")
    gh = _table(t, "github")
    _only(gh, "access.github", {"repo", "token_env", "token_file", "api_url", "map_path"})
    repo = token = None
    if tracker == "github":
        repo = _str(gh, "access.github", "repo", None)
        if not _REPO.fullmatch(repo):
            raise ConfigError("access.github.repo", "must be 'owner/name'")
        if ("token_env" in gh) == ("token_file" in gh):
            raise ConfigError("access.github", "needs exactly one of token_env or token_file")
        key = "access.github.token_env" if "token_env" in gh else "access.github.token_file"
        ref = _str(gh, "access.github", key.rsplit(".", 1)[1], None)
        token = read_secret(("env:" if "token_env" in gh else "file:") + ref, key, base_dir, env)
    ans = _table(t, "answer")
    _only(ans, "access.answer", {"url", "timeout_seconds"})
    url = ans.get("url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ConfigError("access.answer.url", "must be an http:// or https:// URL")
    return AccessConfig(
        tracker=tracker,
        sqlite_path=base_dir / _str(t, k, "sqlite_path", "data/feedback.sqlite3"),
        idempotency_ttl_seconds=_int(t, k, "idempotency_ttl_seconds", 24 * 3600, lo=60, hi=30 * 24 * 3600),
        dedupe_ttl_seconds=_int(t, k, "dedupe_ttl_seconds", 7 * 24 * 3600, lo=60, hi=365 * 24 * 3600),
        labels=_strs(t, k, "labels") or ("kbgate",),
        page_max_bytes=_int(t, k, "page_max_bytes", 8 * KIB, lo=256, hi=256 * KIB),
        context_max_pages=_int(t, k, "context_max_pages", 5, lo=1, hi=20),
        context_max_bytes_per_page=_int(t, k, "context_max_bytes_per_page", 2 * KIB, lo=64, hi=64 * KIB),
        context_max_total_bytes=_int(t, k, "context_max_total_bytes", 8 * KIB, lo=256, hi=256 * KIB),
        github_repo=repo,
        github_token=token,
        github_api_url=_str(gh, "access.github", "api_url", "https://api.github.com"),
        github_map_path=base_dir / _str(gh, "access.github", "map_path", "data/github-issue-map.sqlite3"),
        answer_url=url,
        answer_timeout_seconds=_num(ans, "access.answer", "timeout_seconds", 10.0, lo=0.1, hi=120.0),
    )
