"""`[mcp]`: the MCP server's endpoint, its Origin and Host allow-lists and its bounds.

Rationale: docs/design-notes.md, "gateway/core/config/mcp.py".
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping

from gateway.core.config.fields import WHITESPACE
from gateway.core.config.model import RESERVED_PATHS, McpConfig
from gateway.core.errors import ConfigError
from gateway.core.types import KIB
from gateway.core.validate import Fields

# An Origin as browsers send it (RFC 6454: scheme://host[:port]), or with ':*' for any port.
_ORIGIN = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(\d{1,5}|\*))?")
# A Host header value (RFC 9110 §7.2: host[:port]), or with ':*' for any port.
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:(\d{1,5}|\*))?")


def parse_mcp(t: Fields, tenant_paths: Mapping[str, str]) -> McpConfig:
    """The [mcp] table → McpConfig. tenant_paths: callback path → tenant (a path the MCP
    endpoint may not take). Raises ConfigError naming the key: a path that is not absolute,
    ends in '/', is one of the gateway's own endpoints or a tenant's callback path; an
    Origin or Host that is not `scheme://host[:port]` / `host[:port]` (':*' for any port)."""
    t.only({"path", "allowed_origins", "allowed_hosts", "max_results", "fetch_max_bytes", "max_body_bytes"})
    path = t.string("path", "/mcp")
    if not path.startswith("/") or path == "/" or path.endswith("/") or WHITESPACE.search(path) or any(
            c in path for c in "?#{}"):
        raise ConfigError("mcp.path", "must be an absolute URL path without a trailing '/', like /mcp")
    if any(path == p.rstrip("/") or path.startswith(p) for p in RESERVED_PATHS):
        raise ConfigError("mcp.path", f"{path} is one of the gateway's own endpoints")
    for taken in (path, path + "/"):
        if taken in tenant_paths:
            raise ConfigError("mcp.path", f"{taken} is the callback path of tenants.{tenant_paths[taken]}")
    return McpConfig(
        path=path,
        allowed_origins=_listed(t, "allowed_origins", _ORIGIN, "an Origin like https://chat.example.com "
                                                              "(scheme://host[:port], ':*' for any port)"),
        allowed_hosts=_listed(t, "allowed_hosts", _HOST, "a Host like kb.example.com or 127.0.0.1:* "
                                                        "(host[:port], ':*' for any port)"),
        max_results=t.integer("max_results", 10, lo=1, hi=50),
        fetch_max_bytes=t.integer("fetch_max_bytes", 128 * KIB, lo=1 * KIB, hi=4096 * KIB),
        max_body_bytes=t.integer("max_body_bytes", 64 * KIB, lo=1 * KIB, hi=4096 * KIB),
    )


def _listed(t: Fields, name: str, pattern: re.Pattern[str], what: str) -> tuple[str, ...]:
    if t.data.get(name) == []:
        return ()
    values = t.strings(name) or ()
    for i, v in enumerate(values):
        m = pattern.fullmatch(v)
        if not m or not _literal_ok(m.group(1)):
            raise ConfigError(f"{t.key(name)}[{i}]", f"must be {what}")
    return values


def _literal_ok(host: str) -> bool:
    """A bracketed host must be an IPv6 address (RFC 3986 §3.2.2), else it could never match."""
    if not host.startswith("["):
        return True
    try:
        ipaddress.IPv6Address(host[1:-1])
    except ValueError:
        return False
    return True
