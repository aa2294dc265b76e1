"""`[dify]`: Dify's External Knowledge API endpoint and its bounds.

Rationale: docs/design-notes.md, "gateway/core/config/dify.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from gateway.core.config.model import RESERVED_PATHS, DifyConfig
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields

_PREFIX = re.compile(r"(?:/[A-Za-z0-9._~-]+)*")


def parse_dify(t: Fields, callback_paths: Mapping[str, str]) -> DifyConfig:
    """The [dify] table → DifyConfig. callback_paths: tenant callback path → tenant name.

    Raises ConfigError naming the key: a prefix that is not '' or '/segment[/segment…]'
    (no trailing slash), one whose endpoint lies on the gateway's own paths or on a tenant's
    callback path, a bound out of range.
    """
    if "score_k" in t:
        t.fail("score_k", "format", "is no longer used: a record's score is the hit's relevance, 0..1, the same "
               "on every index (set search.relevance_floor or a route's relevance_floor instead)")
    t.only(DifyConfig.__dataclass_fields__)
    prefix = t.string("prefix", "/dify") if t.data.get("prefix") != "" else ""
    if not _PREFIX.fullmatch(prefix) or len(prefix) > 200:
        raise ConfigError("dify.prefix", "must be '' or an absolute path without a trailing slash, like /dify")
    path = prefix + "/retrieval"
    if any(path == p.rstrip("/") or path.startswith(p) for p in RESERVED_PATHS):
        raise ConfigError("dify.prefix", f"puts the endpoint {path} on one of the gateway's own endpoints")
    if path in callback_paths:
        raise ConfigError(f"tenants.{callback_paths[path]}.path", f"{path} is the Dify endpoint (dify.prefix)")
    max_top_k = t.integer("max_top_k", 10, lo=1, hi=100)
    return DifyConfig(
        prefix=prefix,
        max_top_k=max_top_k,
        default_top_k=t.integer("default_top_k", min(5, max_top_k), lo=1, hi=max_top_k),
        content_chars=t.integer("content_chars", 1500, lo=50, hi=100_000),
        max_query_chars=t.integer("max_query_chars", 2000, lo=1, hi=8192),
    )
