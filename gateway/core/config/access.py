"""`[access]`: the Agent Access tool API's tracker, retention and page budgets (Agent Access API 技术设计).

Rationale: docs/design-notes.md, "gateway/core/config/access.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gateway.core.config.fields import named, read_secret, secret_ref
from gateway.core.config.model import AccessConfig
from gateway.core.errors import ConfigError
from gateway.core.types import KIB
from gateway.core.validate import Fields

_REPO = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
DAY = 24 * 3600


def parse_access(t: Fields, base_dir: Path, env: Mapping[str, str]) -> AccessConfig:
    """The [access] table → AccessConfig. Raises ConfigError naming the key (a github tracker
    without repo or token, an answer URL that is not http(s), a bound out of range)."""
    t.only({"tracker", "sqlite_path", "idempotency_ttl_seconds", "dedupe_ttl_seconds", "labels", "page_max_bytes",
            "context_max_pages", "context_max_bytes_per_page", "context_max_total_bytes", "github", "answer"})
    tracker = t.choice("tracker", ("sqlite", "github"), "sqlite")
    gh = t.table("github")
    gh.only({"repo", "token_env", "token_file", "api_url", "map_path"})
    repo = token = None
    if tracker == "github":
        repo = named(gh, "repo", _REPO, "must be 'owner/name'")
        ref = secret_ref(gh, "token_env", "token_file", required=True)
        assert ref is not None
        token = read_secret(ref[0], ref[1], base_dir, env)
    ans = t.table("answer")
    ans.only({"url", "timeout_seconds"})
    url = ans.data.get("url")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ConfigError("access.answer.url", "must be an http:// or https:// URL")
    return AccessConfig(
        tracker=tracker,
        sqlite_path=base_dir / t.string("sqlite_path", "data/feedback.sqlite3"),
        idempotency_ttl_seconds=t.integer("idempotency_ttl_seconds", DAY, lo=60, hi=30 * DAY),
        dedupe_ttl_seconds=t.integer("dedupe_ttl_seconds", 7 * DAY, lo=60, hi=365 * DAY),
        labels=t.strings("labels") or ("kbgate",),
        page_max_bytes=t.integer("page_max_bytes", 8 * KIB, lo=256, hi=256 * KIB),
        context_max_pages=t.integer("context_max_pages", 5, lo=1, hi=20),
        context_max_bytes_per_page=t.integer("context_max_bytes_per_page", 2 * KIB, lo=64, hi=64 * KIB),
        context_max_total_bytes=t.integer("context_max_total_bytes", 8 * KIB, lo=256, hi=256 * KIB),
        github_repo=repo,
        github_token=token,
        github_api_url=gh.string("api_url", "https://api.github.com"),
        github_map_path=base_dir / gh.string("map_path", "data/github-issue-map.sqlite3"),
        answer_url=url,
        answer_timeout_seconds=ans.number("timeout_seconds", 10.0, lo=0.1, hi=120.0),
    )
