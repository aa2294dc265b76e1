"""The configuration's shapes: frozen dataclasses, one per TOML section, built only by `load`.

Durations are seconds, sizes bytes (UTF-8 bytes for text budgets), lengths of text Unicode
characters. Secrets are `Secret` (repr masked). Each field is documented once, here, and
every key once in `deploy/gateway.example.toml`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gateway.core.config.documents import DocumentsConfig
from gateway.core.config.owners import ConsoleUserConfig, GapsConfig
from gateway.core.config.services import AccessConfig as AccessConfig
from gateway.core.config.services import AuditConfig as AuditConfig
from gateway.core.config.services import DifyConfig as DifyConfig
from gateway.core.config.services import McpConfig as McpConfig
from gateway.core.types import KIB, SECONDS, Secret
from indexes.dense.config import DenseConfig
from indexes.rerank.config import RerankConfig
from indexes.synonyms import Synonyms
from indexes.types import NO_DIALS, Dials, MilvusConfig

DEFAULT_TOLERANCE = 3600 * SECONDS  # the 联网问答Agent callback spec: |now - timestamp| must not exceed 3600 s
# A callback signing key shorter than this is refused: one captured request lets anyone test
# candidate keys offline against its HMAC, and a short key falls to that search.
MIN_SECRET_CHARS = 16
# The gateway's own endpoints: a tenant's callback path may not shadow them.
RESERVED_PATHS = ("/healthz", "/readyz", "/metrics", "/admin/", "/agent-api/", "/agent-access/", "/documents/")
# Agent Access tool API (Agent Access API 技术设计 §7); 'get_page.full_text' lets get_page return whole text.
ACCESS_TOOLS = ("search", "ask", "get_page", "get_page.full_text", "get_context", "create_feedback",
                "create_improvement_task")
# Dify's External Knowledge API: POST {dify.prefix}/retrieval.
DIFY_TOOLS = ("dify.retrieval",)
# The MCP server's tools (gateway/mcp/): their own grants, so MCP clients can be given or
# refused the company's knowledge apart from the agent protocols.
MCP_TOOLS = ("mcp.search", "mcp.fetch")
# The document API (gateway/documents/): writing the indexes a policy's write_indexes names.
DOCUMENT_TOOLS = ("documents.write",)
AGENT_TOOLS = frozenset({"knowledge.search", "knowledge.read", *ACCESS_TOOLS, *DIFY_TOOLS, *MCP_TOOLS, *DOCUMENT_TOOLS})


# ---------------------------------------------------------------- Volcengine tenants (the 联网问答Agent callback spec)


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
    """(FirstLevelId, SecondLevelId) → index plus optional filter ("Body" of the callback spec). relevance_floor: 0..1
    (None: search.relevance_floor; `floor_of`). dials: its retrieval dials (gateway.core.config.dials)."""

    first_level_id: str
    second_level_id: str
    index: str
    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    relevance_floor: float | None = None
    dials: Dials = NO_DIALS


@dataclass(frozen=True, slots=True)
class Tenant:
    """A Volcengine agent account calling one callback path.

    verify: 'enforce' rejects unsigned/badly signed requests; 'report' answers them and records
    the outcome (the console's connectivity test before a key exists) until `report_until`
    (unix s; always set with 'report'), then the tenant enforces by itself (`mode`).
    """

    name: str
    path: str
    verify: str
    secrets: tuple[SecretKey, ...]
    routes: tuple[Route, ...]
    report_until: float | None = None

    def mode(self, now: float) -> str:
        """'report' while verify = 'report' and now (unix s) < report_until, else 'enforce'."""
        reporting = self.verify == "report" and self.report_until is not None and now < self.report_until
        return "report" if reporting else "enforce"

    def route(self, first: str, second: str) -> Route | None:
        """The route of the knowledge path (FirstLevelId, SecondLevelId), or None."""
        for r in self.routes:
            if r.first_level_id == first and r.second_level_id == second:
                return r
        return None


# ---------------------------------------------------------------- the process and its stores


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """[server]: the listener. bind HOST:PORT, hypercorn workers. Sizes in bytes, durations in seconds.

    body_timeout_seconds: a request body must arrive within this (else 408).
    graceful_timeout: how long a stopping worker finishes the requests in flight.
    keep_alive_seconds: a connection with no request in progress (idle between requests, or
        still sending a request's headers) is closed after this; hypercorn has no separate
        header timeout, so this is what bounds a client trickling headers.
    readiness: when /readyz answers 200 (gateway/core/readiness.py): "any" (default), Redis
        answers and one route can serve; "all", every enabled route's index opens (docs/configuration.md).
    public_url: where callers reach this gateway ('https://kb.example.com', no trailing '/') or None.
    trusted_proxies: the addresses and networks (ip_network strings, '10.0.0.0/8', '127.0.0.1')
        of the reverse proxies in front of the server: only a request whose peer is one of them
        has its X-Forwarded-Proto and X-Forwarded-For read (the console: the cookie's Secure
        flag, the address failed logins count against). Empty: those headers are never read.
    """

    bind: str = "127.0.0.1:8080"
    workers: int = 1
    max_body_bytes: int = 64 * KIB
    body_timeout_seconds: float = 10.0
    graceful_timeout: float = 10.0
    keep_alive_seconds: float = 10.0
    readiness: str = "any"
    public_url: str | None = None
    trusted_proxies: tuple[str, ...] = ()


READINESS_MODES = ("any", "all")


@dataclass(frozen=True, slots=True)
class ReplayConfig:
    """[replay]: redis_url None → in-process nonce store (one worker only). tolerance_seconds:
    the signing window (the 联网问答Agent callback spec: at most 3600). timeout_seconds: per Redis command.
    key_prefix: of every Redis key kbgate writes."""

    redis_url: str | None = None
    tolerance_seconds: int = DEFAULT_TOLERANCE
    timeout_seconds: float = 1.0
    key_prefix: str = "kbgate"


SUMMARY_CHARS, SUMMARY_CHARS_MIN, SUMMARY_CHARS_MAX = 520, 20, 4000
"""search.summary_chars (default, range; a route's dial too): the budget of a hit's Summary in characters
(`indexes.passages`; the default read off the curve in docs/search-quality.md, "The Summary")."""

DEFAULT_RELEVANCE_FLOOR = 0.10
"""search.relevance_floor when not set: hits of a relevance under it (`indexes.relevance`) are
dropped on every route without a floor of its own. Read off the shared sets with `make eval`
(docs/search-quality.md, "Floors", has the figures): with lexical relevance, the
highest floor at which no shared set loses more questions than it wins against the committed
0.15 of the earlier relevance."""
DEFAULT_ANSWER_CACHE_ENTRIES = 2048
"""search.answer_cache_entries when not set: see `make bench`'s Zipf rows."""
DEFAULT_ANSWER_CACHE_MIB = 24
"""search.answer_cache_mib when not set: about what 2,048 answers of Limit 5 take (answers.py),
a bound that holds whatever the Limit and excerpt bounds."""


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Limits of the callback's search. chars are Unicode characters, not bytes.

    max_chunks_per_query / max_chunks_per_document: the per-query work bounds of every
    search, whatever the documents (`indexes.types.SearchBounds`): chunk hits
    taken from Tantivy for one query, and stored chunks loaded for one result.
    answer_cache_entries: answers kept per worker by the answer cache (`gateway.core.answers`;
    0 turns it off); a config reload empties it and applies a new size. answer_cache_mib: the
    same cache's memory bound per worker in MiB (estimated by `answers.answer_bytes`).
    relevance_floor: 0..1, the relevance (`indexes.relevance`) under which a hit is dropped on
    every route that sets no `relevance_floor` of its own (tenant routes and agent routes alike).
    """

    default_limit: int = 5
    max_limit: int = 20
    max_query_chars: int = 512
    max_level_id_chars: int = 128
    summary_chars: int = SUMMARY_CHARS
    content_chars: int = 1500
    one_per_document: bool = True
    max_chunks_per_query: int = 2000
    max_chunks_per_document: int = 8
    answer_cache_entries: int = DEFAULT_ANSWER_CACHE_ENTRIES
    answer_cache_mib: int = DEFAULT_ANSWER_CACHE_MIB
    relevance_floor: float = DEFAULT_RELEVANCE_FLOOR


@dataclass(frozen=True, slots=True)
class AdminConfig:
    """The console under `/admin/` and the deliveries record.

    token_sha256: lower-case hex SHA-256 of the admin token (the token itself is never
        stored); it logs in as the admin 'admin'. With neither it nor users, `/admin/` is 404.
    users: the console's users (`[admin.users.NAME]`), each with a role and a credential hash.
    session_secret: what console sessions are signed with (`session_secret_env` or
        `session_secret_file`, a file no other user may read), or None: a key file beside the
        config, made once (gateway.console.sessions).
    state_file: where a server without Redis keeps the console's record across restarts (the
        gap record, marks and filings, questions per day, session revocations:
        gateway.console.keep), resolved against the config's folder; None: in memory only. Not
        used with replay.redis_url (Redis keeps that record).
    show_queries: keep and show the callback's Query text (off: query text is personal data).
    keep_deliveries: ring size per tenant of the deliveries record (entries).
    keep_deleted_days: days a document deleted from the console stays restorable (0: not kept).
    """

    token_sha256: str | None = None
    show_queries: bool = False
    keep_deliveries: int = 200
    users: tuple[ConsoleUserConfig, ...] = ()
    session_secret: Secret | None = None
    state_file: Path | None = None
    keep_deleted_days: int = 7


# ------------------------------------------ agent clients (Agent知识按需搜索与读取, Agent Access API 技术设计)
#
# Policies deny by default (Agent Access API 技术设计 §13 "默认拒绝未声明工具、路径和 dataset"): a client
# must name its routes, tools, datasets and path globs; "*" in datasets and "**" in
# path_globs are the explicit "all".


@dataclass(frozen=True, slots=True)
class AgentRoute:
    """A workspace route of the agent API: name → one index plus the route's own filter.

    datasets / path_globs: None = no restriction by the route (the client policy still
    applies). enabled: False answers search with status 'disabled'. relevance_floor: 0..1, hits
    of a lower relevance are dropped, never lowered to fill a list (Agent知识按需搜索与读取 "独立搜索"); None:
    search.relevance_floor (`floor_of`). dials: its retrieval dials (gateway.core.config.dials).
    """

    name: str
    index: str
    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    enabled: bool = True
    relevance_floor: float | None = None
    dials: Dials = NO_DIALS


@dataclass(frozen=True, slots=True)
class AgentToken:
    """One Bearer token of a client: id (shown in audit) and the SHA-256 hex of the token."""

    id: str
    sha256: str


@dataclass(frozen=True, slots=True)
class AgentPolicy:
    """What one agent client may see (Agent Access API 技术设计 §8).

    routes: agent route names. indexes: None = whatever its routes map to, else a
    whitelist. datasets: None = all ("*"). path_globs: ("**",) = all. tools: names from
    AGENT_TOOLS. include_working_docs: may the client see working docs
    (`gateway.core.scope.WORKING_DOCS`; default False). write_indexes: the indexes the document
    API lets it write (with the 'documents.write' tool), only documents of `datasets`.
    """

    routes: tuple[str, ...]
    tools: tuple[str, ...]
    path_globs: tuple[str, ...]
    datasets: tuple[str, ...] | None = None
    indexes: tuple[str, ...] | None = None
    include_working_docs: bool = False
    write_indexes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AgentClient:
    """One agent client: its id (from its token, never from a body), tokens and policy."""

    id: str
    tokens: tuple[AgentToken, ...]
    policy: AgentPolicy


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """The agent section. ref_key: master key of refs and cursors (None when no client)."""

    routes: Mapping[str, AgentRoute] = field(default_factory=dict)
    clients: Mapping[str, AgentClient] = field(default_factory=dict)
    ref_key: Secret | None = None


# ---------------------------------------------------------------- the whole file

@dataclass(frozen=True, slots=True)
class Config:
    """The whole configuration. `source` is the file it came from (or None).

    paths: callback path → tenant name (each tenant's `path`, unique).
    dense: index name → its hybrid settings; parsed, a `DenseChoices` (`dense = "none"`, and the
        default of a new index or one holding vectors: `DenseChoices.for_index`).
    rerank: index name → its rerank stage (`[indexes.NAME.rerank]`, `indexes.rerank`); an index
        absent from it is not reranked.
    synonyms: index name → its synonyms (`[indexes.NAME] synonyms = "path"`, indexes.synonyms),
        read with the config and reloaded with it; an index absent from it has none. remote: index
        name → the engine serving it (`[indexes.NAME] backend`, gateway.core.config.backends)."""

    server: ServerConfig
    replay: ReplayConfig
    indexes_dir: Path
    search: SearchConfig
    tenants: Mapping[str, Tenant]
    source: Path | None = None
    log_level: str = "info"
    paths: Mapping[str, str] = field(default_factory=dict)
    admin: AdminConfig = AdminConfig()
    agent: AgentConfig = AgentConfig()
    audit: AuditConfig = AuditConfig()
    access: AccessConfig = AccessConfig()
    dense: Mapping[str, DenseConfig] = field(default_factory=dict)
    rerank: Mapping[str, RerankConfig] = field(default_factory=dict)
    dify: DifyConfig = DifyConfig()
    mcp: McpConfig = McpConfig()
    gaps: GapsConfig = GapsConfig()
    synonyms: Mapping[str, Synonyms] = field(default_factory=dict)
    documents: DocumentsConfig = DocumentsConfig()
    remote: Mapping[str, MilvusConfig] = field(default_factory=dict)

    def tenant_at(self, path: str) -> Tenant | None:
        """The tenant whose callback path is `path` (exact match), or None."""
        name = self.paths.get(path)
        return self.tenants[name] if name is not None else None
