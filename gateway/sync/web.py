"""A website as a sync source: its sitemap.xml, or a bounded crawl from a start URL.

Rationale: docs/design-notes.md, "gateway/sync/web.py".
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from collections import deque
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urldefrag, urljoin, urlsplit

from gateway.core.config.sync import SyncSource
from indexes.ingest import DEFAULT_MAX_DOCUMENT_BYTES, read_data
from indexes.ingest.html import parse_html
from indexes.types import Document, IngestError

from .fetch import Fetched, Fetcher
from .plan import Plan

__all__ = ["page_id_path", "plan_web"]

_SKIP_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp", ".ico", ".css", ".js", ".zip", ".gz", ".mp4",
                  ".mp3", ".woff", ".woff2", ".ttf")
_HTML = ("text/html", "application/xhtml+xml")


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


def _links(html: str, base: str, host: str) -> list[str]:
    """Same-host http(s) links of a page, without fragments, in order, each once."""
    parser = _Links()
    try:
        parser.feed(html)
    except Exception:  # a malformed page: the links found so far
        pass
    out: dict[str, None] = {}
    for href in parser.hrefs:
        url = urldefrag(urljoin(base, href.strip()))[0]
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.netloc == host and not parts.path.lower().endswith(
                _SKIP_SUFFIXES):
            out[url] = None
    return list(out)


def page_id_path(url: str) -> str:
    """The path part of a page's id: HOST/PATH[?QUERY] ('docs.example.com/guide/a.html')."""
    parts = urlsplit(url)
    return f"{parts.netloc}{parts.path or '/'}" + (f"?{parts.query}" if parts.query else "")


def _page_markdown(html: str, url: str) -> str:
    """Markdown of a page's main content with a front matter holding its title and URL."""
    import trafilatura

    body = trafilatura.extract(html, url=url, output_format="markdown", include_tables=True,
                               include_comments=False, favor_precision=True)
    meta = trafilatura.extract_metadata(html, default_url=url)
    title = (meta.title if meta is not None else None) or ""
    if not body:  # nothing trafilatura calls content: the whole page, as the HTML reader reads it
        doc = parse_html(html, "page")
        title = title or doc.title
        body = "\n\n".join(f"## {s.heading}\n\n{s.text}" if s.heading else s.text for s in doc.sections)
    front = {"url": url, **({"title": title} if title else {})}
    return "---\n" + "\n".join(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in front.items()) + "\n---\n" + body


def _sitemap(fetcher: Fetcher, url: str, host: str, plan: Plan, depth: int = 0) -> list[tuple[str, str]] | None:
    """(url, lastmod) of a sitemap (an index followed, same host, 3 levels), or None when it
    could not be read (reported)."""
    got = fetcher.get(url)
    if got.status != 200:
        plan.notes.append(f"error {url}: sitemap {got.problem or f'answered HTTP {got.status}'}")
        return None
    try:
        root = ET.fromstring(got.body)
    except ET.ParseError as exc:
        plan.notes.append(f"error {url}: sitemap is not XML ({exc})")
        return None
    ns = root.tag.split("}", 1)[0] + "}" if root.tag.startswith("{") else ""
    out: list[tuple[str, str]] = []
    for entry in root:
        loc = (entry.findtext(f"{ns}loc") or "").strip()
        if not loc or urlsplit(loc).netloc != host:
            continue
        if root.tag == f"{ns}sitemapindex":
            if depth < 3:
                inner = _sitemap(fetcher, loc, host, plan, depth + 1)
                if inner is None:
                    return None
                out.extend(inner)
        else:
            out.append((urldefrag(loc)[0], (entry.findtext(f"{ns}lastmod") or "").strip()))
    return out


def plan_web(source: SyncSource, recorded: dict[str, Any], *, fetcher: Fetcher | None = None,
             max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Plan:
    """The changes that bring the index in step with the website (module docstring). recorded:
    the source's state ({'urls': {url: {...}}}). fetcher: the HTTP side (default: one built
    from the source's settings). Never raises for the network or a page."""
    limit = source.max_document_bytes or max_document_bytes
    own = fetcher is None
    http = fetcher or Fetcher(user_agent=source.user_agent, timeout=source.timeout_seconds,
                              requests_per_second=source.requests_per_second, max_bytes=limit)
    plan = Plan(source)
    raw = recorded.get("urls")
    before: dict[str, dict[str, Any]] = raw if isinstance(raw, dict) else {}
    after: dict[str, dict[str, Any]] = {}
    host = urlsplit(source.location).netloc
    try:
        complete = True
        if source.crawl:
            queue: deque[tuple[str, int]] = deque([(urldefrag(source.location)[0], 0)])
            listed: dict[str, str] = {}
            while queue:
                url, depth = queue.popleft()
                if url in listed:
                    continue
                if len(listed) >= source.max_pages:
                    complete = False
                    break
                listed[url] = ""
                for link in _page(http, source, url, "", before.get(url, {}), after, plan, limit):
                    if depth < source.max_depth and link not in listed:
                        queue.append((link, depth + 1))
        else:
            entries = _sitemap(http, source.location, host, plan)
            complete = entries is not None
            listed_urls = {u for u, _ in entries or []}
            for url, lastmod in (entries or [])[: source.max_pages]:
                for target in _page(http, source, url, lastmod, before.get(url, {}), after, plan, limit):
                    if target not in listed_urls and target not in after:  # a listed URL that redirects
                        _page(http, source, target, "", before.get(target, {}), after, plan, limit)
            if entries is not None and len(entries) > source.max_pages:
                complete = False
                plan.notes.append(f"note {source.location}: {len(entries)} URLs, only the first {source.max_pages} "
                                  "synced (max_pages)")
    finally:
        if own:
            http.close()
    for url, was in before.items():
        if url not in after and (complete or was.get("gone")):
            if was.get("id"):
                plan.deletes.add(str(was["id"]))
        elif url not in after and not complete:
            after[url] = was  # not listed this time, but the listing was cut short: kept
    plan.state = {"urls": {u: s for u, s in after.items() if not s.get("gone")}}
    fetched = sum(1 for d in plan.upserts if isinstance(d, Document))
    plan.summary = (f"{len(after)} URLs, {fetched} (re)indexed, {plan.unchanged} unchanged, "
                    f"{http.requests} requests" + ("" if complete else ", listing incomplete: nothing deleted"))
    return plan


def _page(http: Fetcher, source: SyncSource, url: str, lastmod: str, was: dict[str, Any],
          after: dict[str, dict[str, Any]], plan: Plan, limit: int) -> list[str]:
    """Sync one page into `plan` (module docstring); its same-host links (for a crawl)."""
    doc_id = f"{source.dataset}:{page_id_path(url)}" if source.dataset else page_id_path(url)
    if lastmod and was.get("lastmod") == lastmod and was.get("id"):
        after[url] = was
        plan.unchanged += 1
        return list(was.get("links") or [])
    got: Fetched = http.get(url, etag=was.get("etag"), last_modified=was.get("last_modified"))
    if got.status == 304 and was.get("id"):
        after[url] = {**was, "lastmod": lastmod or was.get("lastmod", "")}
        plan.unchanged += 1
        return list(was.get("links") or [])
    if got.status in (404, 410) or (got.problem or "").startswith("robots.txt disallows"):
        why = got.problem or f"HTTP {got.status}"
        plan.notes.append(f"gone {url}: {why}" + (" (deleted)" if was.get("id") else ""))
        after[url] = {"gone": True}
        if was.get("id"):
            plan.deletes.add(str(was["id"]))
        return []
    if got.status not in (200, 301, 302, 303, 307, 308):
        plan.notes.append(f"error {url}: {got.problem or f'HTTP {got.status}'} (kept as indexed)")
        if was:
            after[url] = was
        return list(was.get("links") or [])
    if got.url != url:  # indexed under the URL it redirects to (crawled or listed), never twice
        if urlsplit(got.url).netloc != urlsplit(url).netloc:
            plan.notes.append(f"error {url}: redirected to another host ({got.url}): not indexed")
            return []
        after[url] = {"redirect": got.url}
        if was.get("id"):
            plan.deletes.add(str(was["id"]))
        return [urldefrag(got.url)[0]]
    digest = hashlib.sha256(got.body).hexdigest()
    links: list[str] = []
    record: dict[str, Any] = {"id": doc_id, "etag": got.etag, "last_modified": got.last_modified, "lastmod": lastmod,
              "sha256": digest, "links": links}
    html = got.media_type in _HTML
    text = got.body.decode(got.charset or "utf-8", "replace") if html else ""
    if html and source.crawl:
        links[:] = _links(text, got.url, urlsplit(url).netloc)
    after[url] = record
    if was.get("sha256") == digest and was.get("id") == doc_id:
        plan.unchanged += 1
        return links
    rel = page_id_path(url)
    if html:
        items = read_data(_page_markdown(text, got.url).encode("utf-8"), rel, media_type="text/markdown",
                          max_document_bytes=limit, dataset=source.dataset or None, source=url,
                          bounds=source.read_bounds)
    else:
        items = read_data(got.body, rel, media_type=got.media_type or None, max_document_bytes=limit,
                          dataset=source.dataset or None, source=url, bounds=source.read_bounds)
    docs = list(items)
    for d in docs:
        if isinstance(d, IngestError):
            plan.notes.append(f"error {url}: {d.reason}")
            after.pop(url, None)
            if was:
                after[url] = was  # kept as indexed; tried again next time
            return links
    plan.upserts.extend(docs)
    return links
