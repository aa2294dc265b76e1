"""Documents deleted from the console, kept restorable for `admin.keep_deleted_days`, then purged.

Rationale: docs/design-notes.md, "gateway/documents/deleted.py".
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from anyio import to_thread

from gateway.core.config.edit import write_atomically
from gateway.core.runtime import Runtime
from indexes.types import CoverImage, Document, Section

log = logging.getLogger("kbgate.documents")

FOLDER = ".deleted"
DAY = 86400.0
PURGE_EVERY = 3600.0  # seconds between two purges in a worker
ENTRY = re.compile(r"[0-9a-f]{24}-[0-9]{13,16}\.json")


@dataclass(frozen=True, slots=True)
class Kept:
    """One kept deletion: `entry` (its file name, what a restore names), index, the document's
    id, title and path, when it was deleted and by whom (unix s), and `until` (restorable up to)."""

    entry: str
    index: str
    doc_id: str
    title: str
    path: str
    deleted_at: float
    by: str
    until: float


def folder(root: Path, index: str) -> Path:
    """Where the deletions of `index` are kept: <indexes.dir>/.deleted/<index>."""
    return Path(root) / FOLDER / index


def as_json(doc: Document) -> dict[str, Any]:
    """A Document as JSON-ready data (`from_json` makes it again)."""
    return dataclasses.asdict(doc)


def from_json(data: dict[str, Any]) -> Document:
    """The Document of `as_json`. Raises ValueError / TypeError / KeyError for anything else."""
    cover = data.get("cover_image")
    meta = tuple((str(n), tuple(v) if isinstance(v, list) else v) for n, v in data.get("metadata") or ())
    return Document(str(data["id"]), str(data["title"]),
                    tuple(Section(**s) for s in data["sections"]), url=data.get("url"), summary=data.get("summary"),
                    publish_time=data.get("publish_time"), cover_image=CoverImage(**cover) if cover else None,
                    path=str(data.get("path") or ""), dataset=str(data.get("dataset") or ""),
                    qa_visible=bool(data.get("qa_visible", True)), metadata=meta,
                    origin=str(data.get("origin") or ""), source=str(data.get("source") or ""))


def keep(root: Path, index: str, doc: Document, *, by: str, now: float) -> str:
    """Keep `doc` of `index` as deleted at `now` by `by`; returns the entry's name. Raises OSError
    (the delete must then not happen: nothing would be restorable)."""
    where = folder(root, index)
    where.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{hashlib.sha256(doc.id.encode('utf-8')).hexdigest()[:24]}-{int(now * 1000):013d}.json"
    body = {"index": index, "id": doc.id, "deleted_at": now, "by": by, "document": as_json(doc)}
    write_atomically(where / name, orjson.dumps(body).decode("utf-8"), 0o600)
    return name


def drop(root: Path, index: str, entry: str) -> None:
    """Remove one entry (absent: nothing to do)."""
    if ENTRY.fullmatch(entry):
        with contextlib.suppress(FileNotFoundError):
            (folder(root, index) / entry).unlink()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("document"), dict) else None


def listing(root: Path, index: str, *, now: float, days: int) -> list[Kept]:
    """The restorable deletions of `index`, newest first, after purging the expired ones."""
    purge_index(root, index, now=now, days=days)
    out = []
    where = folder(root, index)
    names = sorted(os.listdir(where)) if where.is_dir() else []
    for name in names:
        data = _read(where / name) if ENTRY.fullmatch(name) else None
        if data is None:
            continue
        doc = data["document"]
        at = float(data.get("deleted_at") or 0)
        out.append(Kept(name, index, str(data.get("id")), str(doc.get("title") or ""), str(doc.get("path") or ""),
                        at, str(data.get("by") or ""), at + days * DAY))
    return sorted(out, key=lambda k: k.deleted_at, reverse=True)


def find(root: Path, index: str, *, now: float, days: int, entry: str | None = None,
         doc_id: str | None = None) -> tuple[Kept, Document] | None:
    """The kept deletion named `entry`, or the newest of `doc_id`, with its Document; None when
    there is none within the window (or its file is not readable)."""
    for k in listing(root, index, now=now, days=days):
        if (entry is not None and k.entry == entry) or (entry is None and k.doc_id == doc_id):
            data = _read(folder(root, index) / k.entry)
            try:
                return (k, from_json(data["document"])) if data is not None else None
            except (ValueError, TypeError, KeyError):
                return None
    return None


def _deleted_at(entry: str) -> float:
    """When an entry's deletion happened (unix s), from its name."""
    return int(entry.rsplit("-", 1)[1].removesuffix(".json")) / 1000


def purge_index(root: Path, index: str, *, now: float, days: int) -> int:
    """Remove the deletions of `index` kept longer than `days` (their age read from their
    names; any other file, such as a write in progress, is left alone); returns how many."""
    where = folder(root, index)
    if not where.is_dir():
        return 0
    gone = 0
    for name in os.listdir(where):
        if ENTRY.fullmatch(name) and _deleted_at(name) + days * DAY <= now:
            with contextlib.suppress(FileNotFoundError):
                (where / name).unlink()
                gone += 1
    with contextlib.suppress(OSError):
        where.rmdir()  # only when empty
    return gone


def purge(root: Path, *, now: float, days: int) -> int:
    """`purge_index` for every index with kept deletions; returns how many were removed."""
    base = Path(root) / FOLDER
    names = sorted(os.listdir(base)) if base.is_dir() else []
    return sum(purge_index(root, name, now=now, days=days) for name in names if (base / name).is_dir())


async def purge_every(rt: Runtime, seconds: float = PURGE_EVERY) -> None:
    """A worker's task: `purge` at start and every `seconds`, until cancelled. Never raises."""
    while True:
        try:
            gone = await to_thread.run_sync(lambda: purge(rt.config.indexes_dir, now=rt.clock.now(),
                                                          days=rt.config.admin.keep_deleted_days))
            if gone:
                log.info("deleted documents purged", extra={"purged": gone})
        except OSError as exc:
            log.warning("deleted documents: purge failed", extra={"problem": exc.strerror or str(exc)})
        await asyncio.sleep(seconds)
