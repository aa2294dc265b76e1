"""The shapes of the services' sections of the configuration: [audit], [access] (the tool API),
[dify], [mcp]; frozen dataclasses built only by `load` (re-exported by `gateway.core.config.model`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gateway.core.types import KIB, SECONDS, Secret

__all__ = ["AccessConfig", "AuditConfig", "DifyConfig", "McpConfig"]


@dataclass(frozen=True, slots=True)
class AuditConfig:
    """sink: 'stdout' | 'file' | 'off'; path: the JSON-lines file for 'file'."""

    sink: str = "stdout"
    path: Path | None = None


@dataclass(frozen=True, slots=True)
class AccessConfig:
    """The Agent Access tool API (its spec in ../shared/seeds). Durations in seconds, sizes in UTF-8 bytes.

    tracker: 'sqlite' (embedded default, works without GitHub) or 'github'.
    github_token: only for 'github'. answer_url: None → extractive `ask`.
    Retention of idempotency records: the tool API spec leaves it open; 24 h by default.
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


@dataclass(frozen=True, slots=True)
class DifyConfig:
    """[dify]: Dify's External Knowledge API. Lengths in characters.

    prefix: the endpoint Dify is given; it POSTs to prefix + '/retrieval' ('' = the root;
        needs a restart). max_top_k: a top_k above it is clamped to it (a top_k below
        1 or fractional is refused; some Dify versions send it stuck at a default). default_top_k: when top_k is
        absent or null. content_chars: bound of a record's content. max_query_chars: a longer
        query is refused. A record's score is the hit's relevance (gateway.dify.records).
    """

    prefix: str = "/dify"
    max_top_k: int = 10
    default_top_k: int = 5
    content_chars: int = 1500
    max_query_chars: int = 2000

    @property
    def path(self) -> str:
        """The retrieval endpoint's path: prefix + '/retrieval'."""
        return self.prefix + "/retrieval"


@dataclass(frozen=True, slots=True)
class McpConfig:
    """[mcp]: the MCP server (Streamable HTTP) for the clients of [agent].

    path: the endpoint (also answered with a trailing '/'); a restart changes it.
    allowed_origins: browser Origins allowed (exact, or 'scheme://host:*' for any port); a
        request with an Origin outside the list is 403, one without an Origin is allowed.
    allowed_hosts: Host header values allowed ('host:*' for any port); empty = Host not
        checked (behind a proxy the Host is the proxy's choice: list what it forwards).
    max_results: search results per call. fetch_max_bytes: UTF-8 bytes of one fetched text.
    max_body_bytes: one JSON-RPC request body.
    """

    path: str = "/mcp"
    allowed_origins: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    max_results: int = 10
    fetch_max_bytes: int = 128 * KIB
    max_body_bytes: int = 64 * KIB
