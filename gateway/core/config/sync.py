"""`[[indexes.NAME.sources]]`: where `kbgate sync` keeps index NAME current from.

Rationale: docs/design-notes.md, "gateway/core/config/sync.py".
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from gateway.core.config.fields import WHITESPACE, table_of
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields
from indexes.ingest import DEFAULT_READ_BOUNDS, ReadBounds
from indexes.ingest.fields import dataset_problem

__all__ = ["SOURCE_TYPES", "SyncSource", "parse_sources"]

SOURCE_TYPES = ("git", "web", "folder")
_COMMON = ("name", "type", "dataset")
_KEYS = {
    "git": (*_COMMON, "repo", "branch", "subdir"),
    "web": (*_COMMON, "sitemap", "start_url", "max_pages", "max_depth", "requests_per_second", "timeout_seconds",
            "user_agent", "max_document_bytes"),
    "folder": (*_COMMON, "path"),
}
_NAME_CHARS = "letters, digits, '_', '.', '-' (1 to 64)"


@dataclass(frozen=True, slots=True)
class SyncSource:
    """One sync source of an index (module docstring for the keys).

    kind: 'git' | 'web' | 'folder'. location: the repository (URL, or an absolute path), the
    sitemap or start URL, or the folder (absolute). crawl: web only, True for a start URL.
    Unused fields keep their defaults.
    """

    index: str
    name: str
    kind: str
    location: str
    dataset: str = ""
    branch: str | None = None
    subdir: str = ""
    crawl: bool = False
    max_pages: int = 500
    max_depth: int = 3
    requests_per_second: float = 2.0
    timeout_seconds: float = 20.0
    user_agent: str = "kbgate-sync"
    max_document_bytes: int | None = None
    read_bounds: ReadBounds = DEFAULT_READ_BOUNDS

    @property
    def key(self) -> str:
        """'INDEX/NAME': how the sync state and the reports name this source."""
        return f"{self.index}/{self.name}"


def _http_url(t: Fields, name: str) -> str:
    url = t.string(name)
    if not url.startswith(("http://", "https://")) or WHITESPACE.search(url) or len(url) > 2048:
        t.fail(name, "format", "must be an http:// or https:// URL without whitespace")
    return url


def _source(t: Fields, index: str, base_dir: Path, max_document_bytes: int) -> SyncSource:
    kind = t.choice("type", SOURCE_TYPES)
    t.only(_KEYS[kind])
    name = t.string("name")
    if not all(c.isascii() and (c.isalnum() or c in "_.-") for c in name) or len(name) > 64:
        t.fail("name", "format", f"uses {_NAME_CHARS}")
    dataset = t.string("dataset", "")
    if dataset and (problem := dataset_problem(dataset)) is not None:
        t.fail("dataset", "format", problem)
    if kind == "git":
        repo = t.string("repo")
        branch = t.optional_string("branch", max_len=256)
        for key, value in (("repo", repo), ("branch", branch or "")):
            if value.startswith("-"):  # git would read it as an option (--upload-pack=..., --output=...)
                t.fail(key, "format", "must not start with '-'")
        if not repo.startswith(("https://", "http://", "ssh://", "git://", "file://", "git@")):
            repo = str((base_dir / repo).resolve())
        subdir = t.string("subdir", "").strip("/")
        if ".." in subdir.split("/"):
            t.fail("subdir", "format", "must be a folder inside the repository (no '..')")
        return SyncSource(index, name, kind, repo, dataset, branch=branch, subdir=subdir)
    if kind == "folder":
        return SyncSource(index, name, kind, str((base_dir / t.string("path")).resolve()), dataset)
    if ("sitemap" in t) == ("start_url" in t):
        raise ConfigError(t.at, "needs exactly one of sitemap or start_url")
    crawl = "start_url" in t
    return SyncSource(
        index, name, kind, _http_url(t, "start_url" if crawl else "sitemap"), dataset, crawl=crawl,
        max_pages=t.integer("max_pages", 500, lo=1, hi=100_000),
        max_depth=t.integer("max_depth", 3, lo=0, hi=50),
        requests_per_second=t.number("requests_per_second", 2.0, lo=0.01, hi=100.0),
        timeout_seconds=t.number("timeout_seconds", 20.0, lo=0.1, hi=600.0),
        user_agent=t.string("user_agent", "kbgate-sync", max_len=200),
        max_document_bytes=t.integer("max_document_bytes", max_document_bytes, lo=1, hi=2**40),
    )


def parse_sources(tables: list[tuple[str, Fields]], base_dir: Path,
                  max_document_bytes: int, read_bounds: ReadBounds = DEFAULT_READ_BOUNDS,
                  ) -> dict[str, tuple[SyncSource, ...]]:
    """Index name → its sync sources, from each `[indexes.NAME]` table's `sources` (an array of
    tables). base_dir: where relative paths start. max_document_bytes: the default bound of a
    web page. read_bounds: what reading one file may take (the [indexes] table's). Raises
    ConfigError naming the key (`indexes.docs.sources[0].max_pages`)."""
    out: dict[str, tuple[SyncSource, ...]] = {}
    for index, t in tables:
        if "sources" not in t:
            continue
        raw = t.data["sources"]
        if not isinstance(raw, list) or not raw:
            t.fail("sources", "type", "must be an array of tables ([[indexes.NAME.sources]])")
        found: list[SyncSource] = []
        for i, item in enumerate(raw):
            found.append(dataclasses.replace(_source(table_of(item, f"{t.key('sources')}[{i}]"), index, base_dir,
                                                     max_document_bytes), read_bounds=read_bounds))
        names = [s.name for s in found]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ConfigError(f"{t.key('sources')}[{i}].name", f"repeats {name!r}: each source of an index has "
                                                                   "its own name")
        out[index] = tuple(found)
    return out
