"""Ingest: read files of several formats into `Document`s, and chunk them.

`read_paths` dispatches by extension (.jsonl; .md/.markdown; .html/.htm; .txt)
and walks folders recursively in sorted order (hidden files and folders
skipped, unknown extensions ignored inside folders). A file that fails is
reported as an `IngestError` item and skipped; the batch always continues.

Two checks come before any parsing (issue 9: ingest never silently drops or rewrites):
- a document over `max_document_bytes` (a file's size; for JSONL, one record's line) is an
  `IngestError` naming the limit (config `indexes.max_document_bytes`, flag
  `--max-document-bytes`; default DEFAULT_MAX_DOCUMENT_BYTES);
- an empty file (0 bytes, or only whitespace) is an `IngestWarning` and yields no document.

Inside a folder, symlinks are followed only to targets inside that folder: one pointing
outside it (`docs/link.txt -> /etc/passwd`), dangling, or looping is reported and skipped.
A file is read once, under its real path: a symlink to a file or folder the walk reads
anyway is reported (a warning) and skipped (`_walk`).
A path given directly (a file or folder named on the command line) may itself be a symlink.
`delete_missing_problem` is the guard `kbgate index add --delete-missing` runs first.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from ..types import Document, IngestError, IngestWarning
from .chunking import DEFAULT_MAX_CHARS, chunk
from .html import read_html
from .jsonl import read_jsonl, too_large
from .markdown import read_markdown
from .text import read_text

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "SUFFIXES",
    "chunk",
    "delete_missing_problem",
    "read_file",
    "read_paths",
]

SUFFIXES = frozenset({".jsonl", ".md", ".markdown", ".html", ".htm", ".txt"})
MIB = 1024 * 1024
DEFAULT_MAX_DOCUMENT_BYTES = 10 * MIB
"""Largest document accepted by default: 25 times the largest page of the TiDB docs
(system-variables.md, 393 kB); a 50 MB page made 35,818 chunks (issue 9)."""

ReadItem = Document | IngestError | IngestWarning
"""One item of an ingest stream: a document, a skipped file or record, or a notice."""


def read_file(path: Path, rel_path: str, *,
              max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[ReadItem]:
    """Documents of one file; rel_path (forward slashes) is its id/path for tree formats.

    An empty file is one IngestWarning; a non-JSONL file over max_document_bytes one
    IngestError (JSONL checks each record instead).
    """
    suffix = path.suffix.lower()
    try:
        size = path.stat().st_size
        if size == 0:
            yield IngestWarning(rel_path, "empty file (0 bytes): skipped")
            return
        if suffix != ".jsonl" and size > max_document_bytes:
            yield IngestError(rel_path, too_large(size, max_document_bytes))
            return
        # JSONL: the reader reports a file without records (it may be large: not read twice)
        if suffix != ".jsonl" and not path.read_bytes().decode("utf-8", "replace").lstrip("\ufeff").strip():
            yield IngestWarning(rel_path, "empty file (only whitespace): skipped")
            return
    except OSError as exc:
        yield IngestError(rel_path, f"cannot read: {exc.strerror or exc}")
        return
    if suffix == ".jsonl":
        yield from read_jsonl(path, display=rel_path, max_document_bytes=max_document_bytes)
        return
    if suffix in (".md", ".markdown"):
        items: Iterator[ReadItem] = read_markdown(path, rel_path)
    elif suffix in (".html", ".htm"):
        items = read_html(path, rel_path)
    elif suffix == ".txt":
        items = read_text(path, rel_path)
    else:
        yield IngestError(rel_path, f"unsupported file type {suffix or '(none)'!r}")
        return
    for item in items:
        yield replace(item, origin=rel_path) if isinstance(item, Document) else item


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def _walk(folder: Path) -> Iterator[Path | IngestError | IngestWarning]:
    """Files under `folder` with a known suffix (depth first, sorted by name), and an item
    (path relative to `folder`) for each symlink not followed.

    A symlink (to a file or a folder) is followed only when its resolved target lies inside
    `folder` (itself resolved, so a folder given as a symlink is walked as usual); one pointing
    outside, dangling, or looping back to a folder being walked is an IngestError, not read.
    Why: a docs folder with `link.txt -> /etc/passwd` must not put /etc/passwd in an index.
    A dangling or looping symlink whose name has no suffix we read (it might have been a
    folder) is an IngestWarning: every symlink skipped is reported, by name.

    Each file inside is read once, under its real path: a symlink whose target the walk reads
    under its own path (a file with a known suffix, or a folder, outside hidden folders) is an
    IngestWarning naming that path, not a second document with the same text. A target the
    walk does not reach by itself (inside a hidden folder) is read under the first symlink's
    path (in walk order); a further symlink to it is an IngestWarning naming that one.
    """
    root = os.path.realpath(folder)
    yield from _walk_dir(folder, folder, root, (root,), {}, False)


def _walk_dir(folder: Path, here: Path, root: str, ancestors: tuple[str, ...], linked: dict[str, str],
              via_link: bool) -> Iterator[Path | IngestError | IngestWarning]:
    """linked: real path → the path (relative to `folder`) it was first reached by through a
    symlink, for files and folders the walk does not reach by themselves; via_link: `here`
    was entered through a symlink (so what it holds goes into `linked` too)."""
    try:
        with os.scandir(here) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        yield IngestError(here.relative_to(folder).as_posix(), f"cannot read folder: {exc.strerror or exc}")
        return
    for e in entries:
        if e.name.startswith("."):
            continue
        p = here / e.name
        rel = p.relative_to(folder).as_posix()
        wanted = p.suffix.lower() in SUFFIXES  # a file we would read (a folder is always walked)
        try:
            is_dir, is_file = e.is_dir(), e.is_file()  # both follow symlinks
        except OSError:
            is_dir = is_file = False
        if not e.is_symlink():
            if not is_dir and not (is_file and wanted):
                continue
            real = os.path.realpath(p) if is_dir or via_link else ""
            if via_link:
                if real in linked:
                    what = "folder " if is_dir else ""
                    yield IngestWarning(rel, f"{what}{_rel(real, root)} (through a symlink), already read as "
                                             f"{linked[real]}: skipped")
                    continue
                linked[real] = rel
            if is_dir:
                yield from _walk_dir(folder, p, root, (*ancestors, real), linked, via_link)
            else:
                yield p
            continue
        target = os.path.realpath(p)
        if not is_dir and not is_file:  # dangling, looping, or not a regular file (fifo, device)
            reason = "symlink loop" if _loops(p) else "symlink target does not exist or is not a file"
            if wanted:
                yield IngestError(rel, reason)
            else:
                yield IngestWarning(rel, f"{reason}: skipped")
        elif not _inside(target, root):
            if is_dir or wanted:
                yield IngestError(rel, "symlink points outside the ingested folder")
        elif is_dir and target in ancestors:
            yield IngestError(rel, "symlink loop: points back to a folder being walked")
        elif not is_dir and not wanted:
            continue
        elif _walked_directly(target, root, is_dir):
            what = "folder " if is_dir else ""
            yield IngestWarning(rel, f"symlink to {what}{_rel(target, root)}, which is read under its own path: "
                                     "skipped")
        elif target in linked:
            what = "folder " if is_dir else ""
            yield IngestWarning(rel, f"symlink to {what}{_rel(target, root)}, already read as {linked[target]}: "
                                     "skipped")
        else:
            linked[target] = rel
            if is_dir:
                yield from _walk_dir(folder, p, root, (*ancestors, target), linked, True)
            else:
                yield p


def _rel(target: str, root: str) -> str:
    return Path(os.path.relpath(target, root)).as_posix()


def _walked_directly(target: str, root: str, is_dir: bool) -> bool:
    """Does the walk of `root` reach `target` (a real path inside it) without a symlink: no
    hidden part on the way, and for a file a suffix we read?"""
    parts = Path(os.path.relpath(target, root)).parts
    if any(part.startswith(".") for part in parts):
        return False
    return is_dir or Path(target).suffix.lower() in SUFFIXES


def _loops(p: Path) -> bool:
    try:
        os.stat(p)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    return False


def read_paths(paths: Iterable[Path | str], *,
               max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES) -> Iterator[ReadItem]:
    """Documents, errors and warnings from files and folders, in order.

    paths: files and folders as given (a symlink given here is followed, whatever its target).
    A folder's files get ids relative to that folder ("dm/dm-safe-mode.md"); a file
    given directly gets its own name. A missing path is an IngestError, and so is a symlink
    inside a folder that points outside it, dangles or loops; a symlink to what the walk
    reads anyway is an IngestWarning (see `_walk`). Never raises
    for a bad file: errors are items of the stream. max_document_bytes: see the module
    docstring.
    """
    for given in paths:
        root = Path(given)
        if root.is_dir():
            for p in _walk(root):
                if not isinstance(p, Path):
                    yield p
                else:
                    yield from read_file(p, p.relative_to(root).as_posix(),
                                         max_document_bytes=max_document_bytes)
        elif root.is_file():
            yield from read_file(root, root.name, max_document_bytes=max_document_bytes)
        else:
            yield IngestError(str(given), "no such file or folder")


def delete_missing_problem(paths: Iterable[Path | str]) -> str | None:
    """Why `--delete-missing` must not run with these PATHs, or None when it may.

    paths: the PATH arguments of `kbgate index add`, as given. `--delete-missing` removes every
    indexed document this run did not see, so a PATH that is a single file (or missing) would
    delete every other document of the index; only folders (or symlinks to folders) are safe.
    Returns one line naming the offending paths (without the "kbgate:" prefix). Never raises.
    """
    files = [str(p) for p in paths if not Path(p).is_dir()]
    if not files:
        return None
    what = "is not a folder" if len(files) == 1 else "are not folders"
    return (f"--delete-missing removes every document this run does not see, and {', '.join(files)} {what}: "
            "every other document of the index would be deleted. Give the whole folder, or pass --force "
            "to delete them anyway.")
