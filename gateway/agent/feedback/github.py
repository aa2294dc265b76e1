"""GitHub Issues as the IssueTracker (Agent Access API 技术设计 §11 "MVP 可使用 GitHub Issues"), over httpx.

Rationale: docs/design-notes.md, "gateway/agent/feedback/github.py".
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sqlite3
from pathlib import Path
from typing import Any

import httpx

from gateway.agent.feedback.tracker import IssueDraft, TrackedIssue, marker_of
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.errors import ToolError
from gateway.core.types import Clock, Secret

log = logging.getLogger("kbgate.feedback.github")

SECONDARY_LIMIT_WAIT = 60.0  # GitHub: "wait for at least one minute" without retry-after
API_VERSION = "2022-11-28"
_MAP_SCHEMA = """
CREATE TABLE IF NOT EXISTS issue_map (
    kind TEXT NOT NULL, dedupe_key TEXT NOT NULL, number INTEGER NOT NULL,
    url TEXT NOT NULL, created_at INTEGER NOT NULL, count INTEGER NOT NULL DEFAULT 1,
    PRIMARY KEY (kind, dedupe_key))
"""


def marker_comment(kind: str, dedupe_key: str) -> str:
    """The hidden marker appended to an issue body: '<!-- kbgate-dedupe:HEX -->'."""
    return f"<!-- kbgate-dedupe:{marker_of(kind, dedupe_key)} -->"


def _unix(iso: str | None, fallback: float) -> int:
    try:
        return int(dt.datetime.fromisoformat(str(iso).replace("Z", "+00:00")).timestamp())
    except ValueError:
        return int(fallback)


class _Uncertain(Exception):
    """A POST that may or may not have created the issue."""


class GitHubTracker:
    """IssueTracker over the GitHub REST API.

    repo: 'owner/name'. token: a fine-grained token with Issues read/write (never logged).
    map_path: SQLite file of the local key→issue map. api_url: GitHub (Enterprise) API
    base. timeout: seconds per HTTP call. transport: injectable (tests).
    """

    name = "github"

    def __init__(self, *, repo: str, token: Secret, map_path: Path, api_url: str = "https://api.github.com",
                 timeout: float = 10.0, clock: Clock = SYSTEM_CLOCK,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.repo = repo
        self._clock = clock
        self._blocked_until = 0.0
        self._client = httpx.AsyncClient(
            base_url=api_url, timeout=timeout, transport=transport,
            headers={"authorization": f"Bearer {token.reveal()}", "accept": "application/vnd.github+json",
                     "x-github-api-version": API_VERSION, "user-agent": "kbgate-feedback"})
        self._map_path = map_path
        map_path.parent.mkdir(parents=True, exist_ok=True)
        with self._db() as db:
            db.execute(_MAP_SCHEMA)

    # ---- local key→issue map ------------------------------------------

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self._map_path, timeout=5.0, isolation_level=None)

    def _map_get(self, kind: str, key: str) -> TrackedIssue | None:
        with self._db() as db:
            row = db.execute("SELECT number, url, created_at, count FROM issue_map WHERE kind=? AND dedupe_key=?",
                             (kind, key)).fetchone()
        if row is None:
            return None
        return TrackedIssue(kind, key, int(row[2]), int(row[3]), {"number": int(row[0]), "url": row[1]})

    def _map_put(self, kind: str, key: str, issue: dict[str, Any]) -> TrackedIssue:
        created = _unix(issue.get("created_at"), self._clock.now())
        with self._db() as db:
            db.execute("INSERT INTO issue_map (kind, dedupe_key, number, url, created_at) VALUES (?,?,?,?,?) "
                       "ON CONFLICT (kind, dedupe_key) DO NOTHING",
                       (kind, key, int(issue["number"]), str(issue.get("html_url", "")), created))
        found = self._map_get(kind, key)
        assert found is not None
        return found

    def _map_bump(self, kind: str, key: str) -> int | None:
        with self._db() as db:
            row = db.execute("UPDATE issue_map SET count = count + 1 WHERE kind=? AND dedupe_key=? RETURNING count",
                             (kind, key)).fetchone()
        return None if row is None else int(row[0])

    # ---- HTTP -----------------------------------------------------------

    def _block(self, seconds: float) -> float:
        self._blocked_until = max(self._blocked_until, self._clock.now() + seconds)
        return seconds

    def _limited(self, r: httpx.Response) -> float | None:
        """Seconds to wait when `r` is a (primary or secondary) rate-limit answer, else None."""
        if r.status_code not in (403, 429):
            return None
        retry_after = r.headers.get("retry-after")
        if retry_after is not None and retry_after.strip().isdigit():
            return float(retry_after.strip())
        if r.headers.get("x-ratelimit-remaining") == "0":
            reset = r.headers.get("x-ratelimit-reset", "")
            wait = float(reset) - self._clock.now() if reset.isdigit() else SECONDARY_LIMIT_WAIT
            return max(1.0, wait)
        try:
            message = str(r.json().get("message", "")).lower()
        except ValueError:
            message = ""
        if "rate limit" in message or r.status_code == 429:
            return SECONDARY_LIMIT_WAIT
        return None

    async def _send(self, method: str, url: str, **kw: Any) -> httpx.Response:
        now = self._clock.now()
        if now < self._blocked_until:
            wait = round(self._blocked_until - now, 3)
            raise ToolError("access.tool_failed", "the issue tracker is rate limited; retry later",
                            retryable=True, retry_after=wait)
        try:
            r = await self._client.request(method, url, **kw)
        except httpx.HTTPError:
            if method == "POST":
                raise _Uncertain() from None
            raise ToolError("access.tool_failed", "the issue tracker did not answer", retryable=True) from None
        if r.headers.get("x-ratelimit-remaining") == "0" and r.is_success:
            reset = r.headers.get("x-ratelimit-reset", "")
            if reset.isdigit():
                self._block(max(0.0, float(reset) - self._clock.now()))
        limited = self._limited(r)
        if limited is not None:
            self._block(limited)
            log.warning("github rate limited", extra={"status": r.status_code, "retry_after": limited})
            raise ToolError("access.tool_failed", "the issue tracker is rate limited; retry later",
                            retryable=True, retry_after=limited)
        if r.status_code >= 500:
            if method == "POST":
                raise _Uncertain()
            raise ToolError("access.tool_failed", "the issue tracker failed", retryable=True)
        if r.status_code == 410:
            raise ToolError("access.tool_failed", "issues are disabled in the tracker repository", retryable=False)
        if r.status_code == 422:
            raise ToolError("access.tool_failed", "the issue tracker rejected the record (validation failed)",
                            retryable=False)
        if r.status_code in (401, 403, 404):
            raise ToolError("access.tool_failed", "the issue tracker refused kbgate's credentials or repository",
                            retryable=False)
        if not r.is_success:
            raise ToolError("access.tool_failed", f"the issue tracker answered HTTP {r.status_code}",
                            retryable=False)
        return r

    async def _search_marker(self, kind: str, key: str) -> dict[str, Any] | None:
        marker = marker_comment(kind, key)
        q = f'"{marker_of(kind, key)}" repo:{self.repo} in:body type:issue'
        r = await self._send("GET", "/search/issues", params={"q": q, "per_page": "10"})
        try:
            items = r.json().get("items", [])
        except ValueError:
            raise ToolError("access.tool_failed", "the issue tracker answered garbage", retryable=True) from None
        for item in items:
            if isinstance(item, dict) and marker in str(item.get("body") or "") and "pull_request" not in item:
                return item
        return None

    # ---- IssueTracker ---------------------------------------------------

    async def find(self, kind: str, dedupe_key: str) -> TrackedIssue | None:
        """Local map first, then the marker search (a found issue is added to the map)."""
        local = await asyncio.to_thread(self._map_get, kind, dedupe_key)
        if local is not None:
            return local
        item = await self._search_marker(kind, dedupe_key)
        if item is None:
            return None
        return await asyncio.to_thread(self._map_put, kind, dedupe_key, item)

    async def create(self, draft: IssueDraft) -> TrackedIssue:
        """POST the issue once. On an uncertain outcome, look the marker up instead of
        posting again; raises ToolError (retryable) when it is not there yet."""
        body = f"{draft.body}\n\n{marker_comment(draft.kind, draft.dedupe_key)}\n"
        payload: dict[str, Any] = {"title": draft.title, "body": body}
        if draft.labels:
            payload["labels"] = list(draft.labels)
        try:
            r = await self._send("POST", f"/repos/{self.repo}/issues", json=payload)
        except _Uncertain:
            log.warning("github create uncertain; looking the marker up", extra={"kind": draft.kind})
            item = await self._search_marker(draft.kind, draft.dedupe_key)
            if item is None:
                raise ToolError("access.tool_failed", "the issue tracker did not confirm the record; "
                                "a retry looks it up before filing", retryable=True) from None
            return await asyncio.to_thread(self._map_put, draft.kind, draft.dedupe_key, item)
        return await asyncio.to_thread(self._map_put, draft.kind, draft.dedupe_key, r.json())

    async def bump(self, kind: str, dedupe_key: str) -> int | None:
        """Count a duplicate in the local map (no GitHub call: a comment per duplicate
        would spend the rate limit on noise)."""
        result: int | None = await asyncio.to_thread(self._map_bump, kind, dedupe_key)
        return result

    async def close(self) -> None:
        await self._client.aclose()
