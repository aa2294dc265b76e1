"""Ingest: read files of several formats into `Document`s, and chunk them.

`read_paths` dispatches by extension (.jsonl; .md/.markdown; .html/.htm; .txt)
and walks folders recursively in sorted order (hidden files and folders
skipped, unknown extensions ignored inside folders). A file that fails is
reported as an `IngestError` item and skipped; the batch always continues.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

from ..types import Document, IngestError
from .chunking import DEFAULT_MAX_CHARS, chunk
from .html import read_html
from .jsonl import read_jsonl
from .markdown import read_markdown
from .text import read_text

__all__ = ["DEFAULT_MAX_CHARS", "SUFFIXES", "chunk", "read_file", "read_paths"]

SUFFIXES = frozenset({".jsonl", ".md", ".markdown", ".html", ".htm", ".txt"})


def read_file(path: Path, rel_path: str) -> Iterator[Document | IngestError]:
    """Documents of one file; rel_path (forward slashes) is its id/path for tree formats."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from read_jsonl(path, display=rel_path)
    elif suffix in (".md", ".markdown"):
        yield from read_markdown(path, rel_path)
    elif suffix in (".html", ".htm"):
        yield from read_html(path, rel_path)
    elif suffix == ".txt":
        yield from read_text(path, rel_path)
    else:
        yield IngestError(rel_path, f"unsupported file type {suffix or '(none)'!r}")


def _walk(folder: Path) -> Iterator[Path]:
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if any(part.startswith(".") for part in rel.parts):
            continue
        if p.is_file() and p.suffix.lower() in SUFFIXES:
            yield p


def read_paths(paths: Iterable[Path | str]) -> Iterator[Document | IngestError]:
    """Documents and errors from files and folders, in order.

    A folder's files get ids relative to that folder ("dm/dm-safe-mode.md"); a file
    given directly gets its own name. A missing path is an IngestError.
    """
    for given in paths:
        root = Path(given)
        if root.is_dir():
            for p in _walk(root):
                yield from read_file(p, p.relative_to(root).as_posix())
        elif root.is_file():
            yield from read_file(root, root.name)
        else:
            yield IngestError(str(given), "no such file or folder")
