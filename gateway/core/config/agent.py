"""`[agent]` and `[audit]`: agent clients, their tokens and policies, and the audit sink.

Rationale: docs/design-notes.md, "gateway/core/config/agent.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.core.config.dials import DIAL_KEYS, parse_dials
from gateway.core.config.fields import (
    CLIENT_ID,
    INDEX_NAME,
    KEY_ID,
    ROUTE_NAME,
    SHA256_HEX,
    globs,
    named,
    read_secret,
    relevance_floor,
    secret_ref,
    shorter_than,
    table_of,
)
from gateway.core.config.model import (
    AGENT_TOOLS,
    AgentClient,
    AgentConfig,
    AgentPolicy,
    AgentRoute,
    AgentToken,
    AuditConfig,
    Tenant,
)
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields
from indexes.types import DEFAULT_BOUNDS

REF_KEY_MIN_CHARS = 32
DENY_BY_DEFAULT = "is required (policies deny what they do not name)"


def parse_agent(t: Fields, base_dir: Path, env: Mapping[str, str], tenants: Mapping[str, Tenant],
                max_candidates: int = DEFAULT_BOUNDS.max_chunks_per_query) -> AgentConfig:
    """The [agent] table → AgentConfig. tenants: to refuse a ref key equal to a webhook secret.
    max_candidates: `search.max_chunks_per_query` (the bound of a route's `candidates`).

    Raises ConfigError naming the key: unknown routes or tools in a policy, repeated token
    hashes, a missing or short ref key (at least 32 characters) when clients exist.
    """
    t.only({"ref_key_env", "ref_key_file", "routes", "clients"})
    routes: dict[str, AgentRoute] = {}
    for name, raw in t.table("routes").data.items():
        key = f"agent.routes.{name}"
        if not ROUTE_NAME.fullmatch(name):
            raise ConfigError(key, "route names use letters, digits, '_', '.', '-'")
        routes[name] = _route(name, table_of(raw, key), max_candidates)
    clients: dict[str, AgentClient] = {}
    seen_hashes: dict[str, str] = {}
    for cid, raw in t.table("clients").data.items():
        key = f"agent.clients.{cid}"
        if not CLIENT_ID.fullmatch(cid):
            raise ConfigError(key, "client ids use letters, digits, '_', '.', ':', '-'")
        clients[cid] = _client(cid, table_of(raw, key), routes, seen_hashes)
    ref_key = None
    ref = secret_ref(t, "ref_key_env", "ref_key_file", required=False)
    if ref is not None:
        source, where = ref
        ref_key = read_secret(source, where, base_dir, env)
        if shorter_than(ref_key, REF_KEY_MIN_CHARS):
            raise ConfigError(where, f"gives a key shorter than {REF_KEY_MIN_CHARS} characters")
        for tenant in tenants.values():
            for s in tenant.secrets:
                if s.value == ref_key:
                    raise ConfigError(where, f"equals the webhook secret tenants.{tenant.name} key "
                                             f"{s.id!r}; the ref key must be its own")
    elif clients:
        raise ConfigError("agent.ref_key_env", "is required (or agent.ref_key_file) when agent clients exist")
    return AgentConfig(routes, clients, ref_key)


def _route(name: str, r: Fields, max_candidates: int) -> AgentRoute:
    if "min_score" in r:
        r.fail("min_score", "format", "was replaced by relevance_floor, a relevance from 0 to 1 (a raw BM25 "
               "score has no fixed scale); see search.relevance_floor")
    r.only({"index", "datasets", "path_globs", "enabled", "relevance_floor", *DIAL_KEYS})
    index = named(r, "index", INDEX_NAME, "uses letters, digits, '_', '.', '-'")
    return AgentRoute(name, index, r.strings("datasets"), globs(r, "path_globs"), r.boolean("enabled", True),
                      relevance_floor(r), parse_dials(r, max_candidates))


def _client(cid: str, c: Fields, routes: Mapping[str, AgentRoute], seen_hashes: dict[str, str]) -> AgentClient:
    c.only({"tokens", "routes", "indexes", "datasets", "path_globs", "tools", "include_working_docs", "write_indexes"})
    tokens = _tokens(c, seen_hashes)
    policy_routes = c.required_strings("routes", DENY_BY_DEFAULT)
    for rn in policy_routes:
        if rn not in routes:
            raise ConfigError(c.key("routes"), f"names route {rn!r}, which is not in agent.routes")
    tools = c.required_strings("tools", DENY_BY_DEFAULT)
    for tool in tools:
        if tool not in AGENT_TOOLS:
            raise ConfigError(c.key("tools"), f"names unknown tool {tool!r}; known: {sorted(AGENT_TOOLS)}")
    datasets = c.required_strings("datasets", DENY_BY_DEFAULT)
    path_globs = globs(c, "path_globs")
    if path_globs is None:
        raise ConfigError(c.key("path_globs"), DENY_BY_DEFAULT)
    policy = AgentPolicy(
        routes=policy_routes,
        tools=tools,
        path_globs=path_globs,
        datasets=None if "*" in datasets else datasets,
        indexes=c.strings("indexes"),
        include_working_docs=c.boolean("include_working_docs", False),
        write_indexes=_write_indexes(c, tools),
    )
    return AgentClient(cid, tokens, policy)


def _write_indexes(c: Fields, tools: tuple[str, ...]) -> tuple[str, ...]:
    """The indexes the document API lets the client write: required with 'documents.write'
    (deny by default), refused without it (a key that grants nothing is a mistake)."""
    granted = "documents.write" in tools
    if "write_indexes" not in c:
        if granted:
            raise ConfigError(c.key("write_indexes"), "is required with the tool 'documents.write' (the indexes "
                                                       "the client may write; policies deny what they do not name)")
        return ()
    if not granted:
        raise ConfigError(c.key("write_indexes"), "is only used with the tool 'documents.write'")
    names = c.required_strings("write_indexes", DENY_BY_DEFAULT)
    for i, name in enumerate(names):
        if not INDEX_NAME.fullmatch(name):
            raise ConfigError(f"{c.key('write_indexes')}[{i}]", "index names use letters, digits, '_', '.', '-'")
    return names


def _tokens(c: Fields, seen: dict[str, str]) -> tuple[AgentToken, ...]:
    raw: Any = c.data.get("tokens")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(c.key("tokens"), "must be a non-empty array of tables ([[...tokens]])")
    out: list[AgentToken] = []
    for i, entry in enumerate(raw):
        tk = table_of(entry, f"{c.key('tokens')}[{i}]")
        tk.only({"id", "sha256"})
        tid = tk.string("id")
        if not KEY_ID.fullmatch(tid) or any(x.id == tid for x in out):
            raise ConfigError(tk.key("id"), "must be a unique id of letters, digits, '_', '.', ':', '-'")
        digest = named(tk, "sha256", SHA256_HEX, "must be 64 lower-case hex digits (SHA-256 of the token)")
        if digest in seen:
            raise ConfigError(tk.key("sha256"), f"repeats a token hash of {seen[digest]}")
        seen[digest] = tk.at
        out.append(AgentToken(tid, digest))
    return tuple(out)


def parse_audit(t: Fields, base_dir: Path) -> AuditConfig:
    """The [audit] table: sink 'stdout' (default), 'file' (needs path) or 'off'."""
    t.only({"sink", "path"})
    sink = t.choice("sink", ("stdout", "file", "off"), "stdout")
    if sink == "file":
        return AuditConfig(sink, base_dir / t.string("path"))
    if "path" in t:
        raise ConfigError("audit.path", "is only used with sink = 'file'")
    return AuditConfig(sink)
