"""TOML configuration → frozen, validated `Config` (gateway.core.config.model).

Rationale: docs/design-notes.md, "gateway/core/config/load.py".
"""

from __future__ import annotations

import ipaddress
import os
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.core.config.access import parse_access
from gateway.core.config.admin import parse_admin
from gateway.core.config.agent import parse_agent, parse_audit
from gateway.core.config.backends import parse_backends
from gateway.core.config.dials import check_dials
from gateway.core.config.dify import parse_dify
from gateway.core.config.documents import parse_documents
from gateway.core.config.fields import SecretsUnread, section
from gateway.core.config.gaps import parse_gaps
from gateway.core.config.indexes import (
    index_tables,
    parse_dense,
    parse_indexer,
    parse_read_bounds,
    parse_rerank,
    parse_synonyms,
)
from gateway.core.config.mcp import parse_mcp
from gateway.core.config.model import (
    DEFAULT_ANSWER_CACHE_ENTRIES,
    DEFAULT_ANSWER_CACHE_MIB,
    DEFAULT_RELEVANCE_FLOOR,
    DEFAULT_TOLERANCE,
    READINESS_MODES,
    SUMMARY_CHARS,
    SUMMARY_CHARS_MAX,
    SUMMARY_CHARS_MIN,
    AgentConfig,
    Config,
    ReplayConfig,
    SearchConfig,
    ServerConfig,
    Tenant,
)
from gateway.core.config.sync import SyncSource, parse_sources
from gateway.core.config.tenants import parse_tenants
from gateway.core.errors import ConfigError
from gateway.core.redis_clients import url_problem
from gateway.core.types import KIB
from gateway.core.validate import Fields
from indexes.dense.config import DenseChoices
from indexes.ingest import ReadBounds
from indexes.types import DEFAULT_BOUNDS, NO_DIALS, Dials, MilvusConfig

SECTIONS = ("server", "replay", "indexes", "search", "tenants", "log", "admin", "agent", "audit", "access", "dify",
            "mcp", "gaps", "documents")
LOG_LEVELS = ("debug", "info", "warning", "error")


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed TOML document at `path`. Raises ConfigError('<file>', naming `path`) when unreadable or invalid."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be read: {exc.strerror}", file=path) from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError("<file>", f"is not valid TOML: {exc}", file=path) from None


def load_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None, *,
                read_secrets: bool = True) -> Config:
    """Read and validate a TOML config file (env: the environment secrets come from; os.environ).

    read_secrets=False: for commands that need no secret's value (`kbgate secrets list|retire|add`,
    onboard's edits): every secret reference (value_env, *_file, ...) is checked for its form
    only, neither read nor required to exist, and held as an `UnreadSecret`. `serve` and
    `check-config` read them all. Raises ConfigError (naming the key) for an unreadable file,
    bad TOML, unknown or ill-typed keys, empty or whitespace-carrying secrets, unset env vars,
    duplicate paths.
    """
    p = Path(path)
    return parse_config(read_toml(p), base_dir=p.resolve().parent, env=env, source=p.resolve(),
                        read_secrets=read_secrets)


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
    return parse_indexer(section(read_toml(p)).table("indexes"), p.resolve().parent)


def load_read_bounds(path: str | os.PathLike[str]) -> ReadBounds:
    """The reader bounds of `[indexes]` (`parse_read_bounds`), for `kbgate index add` and
    `kbgate sync`, like `load_indexer_config`."""
    return parse_read_bounds(section(read_toml(Path(path))).table("indexes"))


def load_indexes(path: str | os.PathLike[str], env: Mapping[str, str] | None = None,
                 ) -> tuple[Path, DenseChoices]:
    """`indexes.dir` (resolved against the file's folder) and the hybrid settings of each index
    (`[indexes.NAME.dense]`), and nothing else of the file.

    For the indexer (`kbgate index add`), which must not need the gateway's secrets in its
    environment: only an embedding service's API key, when one is configured, is read (from
    `env`, default os.environ). Raises ConfigError for an unreadable or invalid file or key.
    """
    p = Path(path)
    base = p.resolve().parent
    idx = section(read_toml(p)).table("indexes")
    return parse_indexer(idx, base)[0], parse_dense(idx, base, os.environ if env is None else env)


def load_backends(path: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> dict[str, MilvusConfig]:
    """The engines serving indexes (`[indexes.NAME] backend`), and nothing else of the file: what
    the indexer and sync need besides `load_indexes` (a Milvus token, when one is configured, is
    read from `env`, default os.environ). Raises ConfigError naming the key."""
    p = Path(path)
    return parse_backends(section(read_toml(p)).table("indexes"), p.resolve().parent,
                          os.environ if env is None else env)


def load_sync_config(path: str | os.PathLike[str], env: Mapping[str, str] | None = None,
                     ) -> tuple[Path, DenseChoices, dict[str, tuple[SyncSource, ...]]]:
    """What `kbgate sync` reads, like `load_indexes` (no tenant secret; an embedding API key when
    an index is hybrid): (`indexes.dir`, the hybrid settings, each index's sync sources). Raises
    ConfigError naming the key."""
    p = Path(path)
    base = p.resolve().parent
    idx = section(read_toml(p)).table("indexes")
    folder, max_bytes = parse_indexer(idx, base)
    return (folder, parse_dense(idx, base, os.environ if env is None else env),
            parse_sources(index_tables(idx), base, max_bytes, parse_read_bounds(idx)))


def parse_config(data: Mapping[str, Any], *, base_dir: Path, env: Mapping[str, str] | None = None,
                 source: Path | None = None, read_secrets: bool = True, now: float | None = None) -> Config:
    """Validate a parsed TOML document (see `load_config`). base_dir: where relative paths start.
    now: unix s of the load (None: the system clock), the instant report_until is bounded from."""
    env = SecretsUnread() if not read_secrets else os.environ if env is None else env
    top = section(data)
    top.only(SECTIONS)
    server = _server(top.table("server"))
    replay = _replay(top.table("replay"))
    if server.workers > 1 and replay.redis_url is None:
        raise ConfigError(
            "server.workers",
            f"is {server.workers}, but the in-process replay store serves one worker only; "
            "set replay.redis_url to share nonces between workers",
        )
    search = _search(top.table("search"))
    log = top.table("log")
    log.only({"level"})
    tenants, paths = parse_tenants(top.table("tenants"), base_dir, env, search.max_level_id_chars,
                                   search.max_chunks_per_query, now)
    indexes = top.table("indexes")
    indexes_dir, max_document_bytes = parse_indexer(indexes, base_dir)
    parse_sources(index_tables(indexes), base_dir, max_document_bytes)  # refused here too
    agent = parse_agent(top.table("agent"), base_dir, env, tenants, search.max_chunks_per_query)
    dense, rerank = parse_dense(indexes, base_dir, env), parse_rerank(indexes, base_dir, env)
    check_dials(_route_dials(tenants, agent), dense, rerank)
    admin = parse_admin(top.table("admin"), base_dir, env)
    return Config(
        server=server,
        replay=replay,
        indexes_dir=indexes_dir,
        search=search,
        tenants=tenants,
        source=source,
        log_level=log.choice("level", LOG_LEVELS, "info"),
        paths=paths,
        admin=admin,
        agent=agent,
        audit=parse_audit(top.table("audit"), base_dir),
        access=parse_access(top.table("access"), base_dir, env),
        dense=dense,
        rerank=rerank,
        synonyms=parse_synonyms(indexes, base_dir),
        gaps=parse_gaps(top.table("gaps"), base_dir, env),
        dify=parse_dify(top.table("dify"), paths),
        mcp=parse_mcp(top.table("mcp"), paths),
        documents=parse_documents(top.table("documents"), max_document_bytes, parse_read_bounds(indexes)),
        remote=parse_backends(indexes, base_dir, env),
    )


def _route_dials(tenants: Mapping[str, Tenant], agent: AgentConfig) -> Iterator[tuple[str, str, Dials]]:
    """(key, index, dials) of every route that sets a dial (`check_dials`)."""
    for name, tenant in tenants.items():
        yield from ((f"tenants.{name}.routes[{i}]", r.index, r.dials) for i, r in enumerate(tenant.routes)
                    if r.dials != NO_DIALS)
    yield from ((f"agent.routes.{r.name}", r.index, r.dials) for r in agent.routes.values() if r.dials != NO_DIALS)


def _server(t: Fields) -> ServerConfig:
    t.only({"bind", "workers", "max_body_bytes", "body_timeout_seconds", "graceful_timeout", "keep_alive_seconds",
            "readiness", "public_url", "trusted_proxies"})
    bind = t.string("bind", "127.0.0.1:8080")
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("server.bind", "must be HOST:PORT, e.g. 127.0.0.1:8080")
    return ServerConfig(
        bind=bind,
        workers=t.integer("workers", 1, lo=1, hi=64),
        max_body_bytes=t.integer("max_body_bytes", 64 * KIB, lo=256, hi=16 * 1024 * KIB),
        body_timeout_seconds=t.number("body_timeout_seconds", 10.0, lo=0.1, hi=300.0),
        graceful_timeout=t.number("graceful_timeout", 10.0, lo=0.0, hi=600.0),
        keep_alive_seconds=t.number("keep_alive_seconds", 10.0, lo=1.0, hi=300.0),
        readiness=t.choice("readiness", READINESS_MODES, "any"),
        public_url=_public_url(t.data.get("public_url")),
        trusted_proxies=_networks(t),
    )


def _networks(t: Fields) -> tuple[str, ...]:
    """`server.trusted_proxies`: each an IP address or network ('10.0.0.0/8'), kept normalised.
    Raises ConfigError naming the entry."""
    out: list[str] = []
    if t.data.get("trusted_proxies") == []:
        return ()
    for i, value in enumerate(t.strings("trusted_proxies") or ()):
        try:
            out.append(str(ipaddress.ip_network(value.strip(), strict=False)))
        except ValueError:
            raise ConfigError(f"server.trusted_proxies[{i}]", "must be an IP address or network, e.g. "
                                                              "10.0.0.0/8 or 127.0.0.1") from None
    return tuple(out)


def _public_url(value: object) -> str | None:
    """`server.public_url`: 'http(s)://host[:port][/prefix]' without query or fragment, kept
    without a trailing '/'; None when absent. Raises ConfigError naming the key."""
    if value is None:
        return None
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.query \
            or parts.fragment or parts.username is not None or any(c.isspace() for c in str(value)):
        raise ConfigError("server.public_url", "must be http(s)://HOST[:PORT][/PREFIX] without user, query or "
                          "fragment, e.g. https://kb.example.com")
    try:
        parts.port  # noqa: B018  (a port out of range raises here)
    except ValueError:
        raise ConfigError("server.public_url", "has a port that is not a number in 1-65535") from None
    return str(value).rstrip("/")


def _replay(t: Fields) -> ReplayConfig:
    t.only({"redis_url", "tolerance_seconds", "timeout_seconds", "key_prefix"})
    url = t.data.get("redis_url")
    problem = None if url is None else url_problem(url)
    if problem is not None:
        raise ConfigError("replay.redis_url", problem)
    return ReplayConfig(
        redis_url=url or None,
        tolerance_seconds=t.integer("tolerance_seconds", DEFAULT_TOLERANCE, lo=1, hi=DEFAULT_TOLERANCE),
        timeout_seconds=t.number("timeout_seconds", 1.0, lo=0.05, hi=10.0),
        key_prefix=t.string("key_prefix", "kbgate"),
    )


def _search(t: Fields) -> SearchConfig:
    t.only(SearchConfig.__dataclass_fields__)
    max_limit = t.integer("max_limit", 20, lo=1, hi=100)
    per_query = t.integer("max_chunks_per_query", max(DEFAULT_BOUNDS.max_chunks_per_query, max_limit),
                          lo=1, hi=100_000)
    if per_query < max_limit:
        t.fail("max_chunks_per_query", "range", f"is {per_query}, below search.max_limit ({max_limit}): a search "
               "could not return that many documents")
    return SearchConfig(
        default_limit=t.integer("default_limit", min(5, max_limit), lo=1, hi=max_limit),
        max_limit=max_limit,
        max_query_chars=t.integer("max_query_chars", 512, lo=1, hi=8192),
        max_level_id_chars=t.integer("max_level_id_chars", 128, lo=1, hi=1024),
        summary_chars=t.integer("summary_chars", SUMMARY_CHARS, lo=SUMMARY_CHARS_MIN, hi=SUMMARY_CHARS_MAX),
        content_chars=t.integer("content_chars", 1500, lo=50, hi=100_000),
        one_per_document=t.boolean("one_per_document", True),
        max_chunks_per_query=per_query,
        max_chunks_per_document=t.integer("max_chunks_per_document", DEFAULT_BOUNDS.max_chunks_per_document,
                                          lo=1, hi=1000),
        answer_cache_entries=t.integer("answer_cache_entries", DEFAULT_ANSWER_CACHE_ENTRIES, lo=0, hi=100_000),
        answer_cache_mib=t.integer("answer_cache_mib", DEFAULT_ANSWER_CACHE_MIB, lo=1, hi=65_536),
        relevance_floor=t.number("relevance_floor", DEFAULT_RELEVANCE_FLOOR, lo=0.0, hi=1.0),
    )
