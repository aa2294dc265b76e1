"""Polite HTTP for website sources: robots.txt, a rate limit, conditional GETs, bounded bodies.

Rationale: docs/design-notes.md, "gateway/sync/fetch.py".
"""

from __future__ import annotations

import time
import urllib.robotparser
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx

__all__ = ["Fetched", "Fetcher"]


@dataclass(frozen=True, slots=True)
class Fetched:
    """One answer: status (304: not modified; 3xx: a redirect), URL (a redirect's target), media type (without
    parameters), body (b'' unless 200), ETag, Last-Modified; or `problem` (why there is no answer:
    'robots.txt disallows it', a network error, a body too large), status 0 then."""

    status: int
    url: str
    media_type: str = ""
    body: bytes = b""
    etag: str | None = None
    last_modified: str | None = None
    problem: str | None = None
    charset: str | None = None


class Fetcher:
    """One source's HTTP client (module docstring). sleep/clock: seams for the rate limit."""

    def __init__(self, *, user_agent: str, timeout: float, requests_per_second: float, max_bytes: int,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = httpx.Client(headers={"User-Agent": user_agent}, timeout=timeout, follow_redirects=False)
        self.user_agent = user_agent
        self.interval = 1.0 / requests_per_second
        self.max_bytes = max_bytes
        self._sleep, self._clock = sleep, clock
        self._last = float("-inf")
        self._robots: dict[str, urllib.robotparser.RobotFileParser | None] = {}
        self.requests = 0

    def close(self) -> None:
        self.client.close()

    def _wait(self, delay: float = 0.0) -> None:
        pause = self._last + max(self.interval, delay) - self._clock()
        if pause > 0:
            self._sleep(pause)
        self._last = self._clock()
        self.requests += 1

    def robots(self, url: str) -> urllib.robotparser.RobotFileParser | None:
        """The robots.txt rules of `url`'s host; None when robots.txt could not be read (5xx,
        network): then nothing may be fetched."""
        parts = urlsplit(url)
        origin = f"{parts.scheme}://{parts.netloc}"
        if origin not in self._robots:
            rules = urllib.robotparser.RobotFileParser(f"{origin}/robots.txt")
            readable = True
            self._wait()
            try:
                r = self.client.get(f"{origin}/robots.txt")
                if r.status_code >= 500:
                    readable = False
                else:  # a 4xx: no robots.txt, everything allowed (RFC 9309 2.3.1.3)
                    rules.parse(r.text[: self.max_bytes].splitlines() if r.status_code < 400 else [])
            except httpx.HTTPError:
                readable = False
            self._robots[origin] = rules if readable else None
        return self._robots[origin]

    def allowed(self, url: str) -> str | None:
        """None when robots.txt lets this user agent fetch `url`, else why not."""
        rules = self.robots(url)
        if rules is None:
            return "robots.txt of the host could not be read (a server error or no answer): nothing fetched"
        if not rules.can_fetch(self.user_agent, url):
            return "robots.txt disallows it: not fetched"
        return None

    def get(self, url: str, *, etag: str | None = None, last_modified: str | None = None) -> Fetched:
        """GET `url` politely (module docstring). Never raises for the network or the server."""
        refused = self.allowed(url)
        if refused is not None:
            return Fetched(0, url, problem=refused)
        rules = self.robots(url)
        delay = float(rules.crawl_delay(self.user_agent) or 0) if rules is not None else 0.0
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        self._wait(delay)
        try:
            with self.client.stream("GET", url, headers=headers) as r:
                if r.is_redirect and r.headers.get("location"):
                    return Fetched(r.status_code, urljoin(url, r.headers["location"]))
                final = str(r.url)
                media = r.headers.get("content-type", "").split(";", 1)[0].strip().lower()
                common = {"etag": r.headers.get("etag"), "last_modified": r.headers.get("last-modified")}
                if r.status_code != 200:
                    return Fetched(r.status_code, final, media, **common)
                declared = r.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
                    return Fetched(0, final, problem=f"{declared} bytes is over the maximum document size of "
                                                     f"{self.max_bytes} bytes")
                body = bytearray()
                for part in r.iter_bytes():
                    body += part
                    if len(body) > self.max_bytes:
                        return Fetched(0, final, problem=f"over the maximum document size of {self.max_bytes} bytes")
                return Fetched(200, final, media, bytes(body), charset=r.charset_encoding, **common)
        except httpx.HTTPError as exc:
            return Fetched(0, url, problem=f"{type(exc).__name__}: {str(exc)[:160] or 'no answer'}")
