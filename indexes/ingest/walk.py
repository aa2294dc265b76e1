"""The folder walk of `read_paths` (`indexes.ingest`): files with a suffix we read, depth first in
sorted order, symlinks followed only inside the folder, every file skipped reported."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from ..types import IngestError, IngestWarning
from .formats import FORMATS, supported

__all__ = ["SUFFIXES", "walk"]

SUFFIXES = frozenset({".jsonl", *(s for f in FORMATS for s in f.suffixes)})


def _inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root.rstrip(os.sep) + os.sep)


def walk(folder: Path) -> Iterator[Path | IngestError | IngestWarning]:
    """The files `read_paths` reads under `folder`, and a report for each it skips (`_walk`)."""
    return _walk(folder)


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
            continue  # .git, .DS_Store, editor files: not documents, never entered (nor reported)
        p = here / e.name
        rel = p.relative_to(folder).as_posix()
        wanted = p.suffix.lower() in SUFFIXES  # a file we would read (a folder is always walked)
        try:
            is_dir, is_file = e.is_dir(), e.is_file()  # both follow symlinks
        except OSError:
            is_dir = is_file = False
        if not e.is_symlink():
            if not is_dir and not (is_file and wanted):
                yield IngestWarning(rel, _unsupported(p) if is_file else "not a regular file: skipped")
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
            yield IngestWarning(rel, _unsupported(p))
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


def _unsupported(p: Path) -> str:
    """The reason a file inside a folder is skipped for its type (every file skipped
    is reported, so a folder of PDFs never reads as a quiet "0 added")."""
    return f"unsupported file type {p.suffix.lower() or '(none)'!r}: skipped (kbgate reads {supported()})"


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
