"""Ingest: read files of several formats into `Document`s, and chunk them.

Rationale: docs/design-notes.md, "indexes/ingest/__init__.py".
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from ..invisible import name_problem
from ..paths import document_problem
from ..types import Document, IngestError, IngestWarning
from .bounds import DEFAULT_READ_BOUNDS, ReadBounds
from .chunking import DEFAULT_MAX_CHARS, chunk
from .clean import clean_document
from .confine import confined_read
from .fields import dataset_problem, length_problem
from .jsonl import read_jsonl, too_large
from .walk import SUFFIXES, _inside, _walk, walk

__all__ = [
    "DEFAULT_READ_BOUNDS",
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_DOCUMENT_BYTES",
    "ReadBounds",
    "SUFFIXES",
    "chunk",
    "delete_missing_problem",
    "document_id",
    "read_data",
    "read_file",
    "read_paths",
    "walk",
]

MIB = 1024 * 1024
DEFAULT_MAX_DOCUMENT_BYTES = 10 * MIB
"""Largest document accepted by default: 25 times the largest page of the TiDB docs
(system-variables.md, 393 kB); a 50 MB page made 35,818 chunks."""

ReadItem = Document | IngestError | IngestWarning
"""One item of an ingest stream: a document, a skipped file or record, or a notice."""


def document_id(dataset: str, path: str) -> str:
    """The id of a tree document (Markdown, HTML, text): `path` (relative to the run's root,
    forward slashes) when `dataset` is '', else '{dataset}:{path}' (module docstring). A
    dataset holding ':' could in theory meet another's id ('a:b' + 'c', 'a' + 'b:c'): the
    writer refuses a document whose id another dataset holds, so it never replaces one."""
    return f"{dataset}:{path}" if dataset else path


def read_file(path: Path, rel_path: str, *, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
              dataset: str | None = None, url_base: str | None = None,
              bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> Iterator[ReadItem]:
    """`_read_file`, each document cleaned for callers (`indexes.ingest.clean.clean_document`:
    page URLs http(s) only, relative ones resolved against `url_base`; control characters out;
    titles bounded), every change reported as an IngestWarning after its document. Each
    document's `source` is the real path of `path`. bounds: what its reading may take
    (`indexes.ingest.bounds`; a file not JSON Lines is read in a child process,
    `indexes.ingest.confine`)."""
    source = os.path.realpath(path)
    for item in _read_file(path, rel_path, max_document_bytes=max_document_bytes, dataset=dataset, bounds=bounds):
        if isinstance(item, Document):
            item, notes = clean_document(replace(item, source=source), url_base)
            yield item
            yield from notes
        else:
            yield item


def _read_file(path: Path, rel_path: str, *, max_document_bytes: int,
               dataset: str | None, bounds: ReadBounds) -> Iterator[ReadItem]:
    """Documents of one file; rel_path (forward slashes, relative to the run's root) is its path
    for tree formats, and its id with the dataset (`document_id`).

    dataset: the dataset of documents that do not name one (`kbgate index add --dataset`).
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
            yield IngestError(rel_path, too_large(size, max_document_bytes), kind="too_large")
            return
        data = b"" if suffix == ".jsonl" else path.read_bytes()  # JSONL is read as a stream
    except OSError as exc:
        yield IngestError(rel_path, f"cannot read: {exc.strerror or exc}", kind="unreadable")
        return
    if suffix == ".jsonl":
        for row in read_jsonl(path, display=rel_path, max_document_bytes=max_document_bytes):
            if isinstance(row, Document) and dataset and not row.dataset:
                row = replace(row, dataset=dataset)
            yield row
        return
    yield from _identified(iter(confined_read(data, rel_path, max_document_bytes=max_document_bytes, bounds=bounds)),
                           rel_path, dataset)


def read_data(data: bytes, rel_path: str, *, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
              media_type: str | None = None, dataset: str | None = None, url_base: str | None = None,
              source: str = "", bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> Iterator[ReadItem]:
    """One file's bytes (not JSON Lines) as `read_file` reads a file: the format from
    `media_type` or the suffix of `rel_path` (`indexes.ingest.formats.read_bytes`), the id
    from `dataset` and `rel_path` (`document_id`), cleaned for callers (`clean_document`).
    For bytes that are no file here: a sync source's page or Git blob, an upload.
    source: what the document remembers it was read from (a URL, 'git:REPO@PATH'), '' for none.
    bounds: see `read_file` (the bytes are read in a child process)."""
    items = _identified(iter(confined_read(data, rel_path, media_type=media_type,
                                           max_document_bytes=max_document_bytes, bounds=bounds)), rel_path, dataset)
    for item in items:
        if isinstance(item, Document):
            item, notes = clean_document(replace(item, source=source) if source else item, url_base)
            yield item
            yield from notes
        else:
            yield item


def _identified(items: Iterator[ReadItem], rel_path: str, dataset: str | None) -> Iterator[ReadItem]:
    """Each Document of a tree file with its id, dataset and origin (`document_id`); a path
    or dataset no id may hold refuses it (module docstring)."""
    for item in items:
        if isinstance(item, Document):
            named = item.dataset or dataset or ""
            problem = name_problem(rel_path)
            if problem is not None:
                yield IngestError(rel_path, f"file path {problem}: skipped (a path is the document's id, "
                                            "never rewritten; rename the file)")
                continue
            problem = dataset_problem(named)
            if problem is not None:
                yield IngestError(rel_path, f"dataset {problem}: skipped")
                continue
            doc_id = document_id(named, rel_path)
            problem = document_problem(doc_id, rel_path)
            if problem is not None:
                yield IngestError(rel_path, f"file {problem}: skipped (a path is the document's id, never rewritten)")
                continue
            problem = length_problem(doc_id)
            if problem is not None:
                yield IngestError(rel_path, f"document id {problem}: skipped (shorten the path)")
                continue
            item = replace(item, id=doc_id, dataset=named, origin=rel_path)
        yield item


def read_paths(paths: Iterable[Path | str], *, max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
               root: Path | str | None = None, dataset: str | None = None,
               url_base: str | None = None, bounds: ReadBounds = DEFAULT_READ_BOUNDS) -> Iterator[ReadItem]:
    """Documents, errors and warnings from files and folders, in order.

    paths: files and folders as given (a symlink given here is followed, whatever its target).
    root: the folder tree paths are relative to (module docstring: document identity); every
    path must lie inside it (after resolving symlinks), one outside is an IngestError. None:
    a folder's files get paths relative to that folder ("dm/dm-safe-mode.md"); a file
    given directly gets its own name. dataset, url_base: see `read_file`.
    A missing path is an IngestError, and so is a symlink
    inside a folder that points outside it, dangles or loops; a symlink to what the walk
    reads anyway is an IngestWarning (see `_walk`). Never raises
    for a bad file: errors are items of the stream. max_document_bytes: see the module
    docstring. bounds: see `read_file`.
    """
    if dataset and (problem := dataset_problem(dataset)) is not None:
        yield IngestError("--dataset", f"dataset name {dataset!r} {problem}: nothing read")
        return
    base = Path(os.path.realpath(root)) if root is not None else None
    for given in paths:
        top = Path(given)
        if not top.exists():
            yield IngestError(str(given), "no such file or folder")
            continue
        if base is not None:
            top = Path(os.path.realpath(top))
            if not _inside(str(top), str(base)):
                yield IngestError(str(given), f"is outside the root {base} that document paths are relative to")
                continue
        if top.is_dir():
            rel_to = base if base is not None else top
            for p in _walk(top):
                if not isinstance(p, Path):
                    yield _under(p, top, rel_to)
                else:
                    yield from read_file(p, p.relative_to(rel_to).as_posix(), max_document_bytes=max_document_bytes,
                                         dataset=dataset, url_base=url_base, bounds=bounds)
        elif top.is_file():
            rel = top.relative_to(base).as_posix() if base is not None else top.name
            yield from read_file(top, rel, max_document_bytes=max_document_bytes, dataset=dataset, url_base=url_base,
                                 bounds=bounds)
        else:
            yield IngestError(str(given), "no such file or folder")


def _under(item: IngestError | IngestWarning, top: Path, rel_to: Path) -> IngestError | IngestWarning:
    """A walk item (its file relative to the folder walked, `top`) with its file relative to the
    run's root instead, like the documents' paths."""
    if top == rel_to:
        return item
    return replace(item, file=(top / item.file).relative_to(rel_to).as_posix())


def delete_missing_problem(paths: Iterable[Path | str], root: Path | str | None = None) -> str | None:
    """Why `--delete-missing` must not run with these PATHs, or None when it may.

    paths: the PATH arguments of `kbgate index add`, as given; root: the run's root (see
    `read_paths`), or None. `--delete-missing` removes every indexed document of the run's
    datasets that this run did not see, so a PATH that is a single file (or missing) would
    delete every other document; so would a folder below the root (ids are relative to the
    root: the documents outside that folder would all be missing). Only the root itself, or
    folders when there is no root, are safe.
    Returns one line naming the offending paths (without the "kbgate:" prefix). Never raises.
    """
    given = [str(p) for p in paths]
    files = [p for p in given if not Path(p).is_dir()]
    if files:
        what = "is not a folder" if len(files) == 1 else "are not folders"
        return (f"--delete-missing removes every document this run does not see, and {', '.join(files)} {what}: "
                "every other document of the index would be deleted. Give the whole folder, or pass --force "
                "to delete them anyway.")
    if root is not None:
        top = os.path.realpath(root)
        below = [p for p in given if os.path.realpath(p) != top]
        if below:
            what = "is a folder" if len(below) == 1 else "are folders"
            return (f"--delete-missing removes every document this run does not see, and {', '.join(below)} {what} "
                    f"below the root {top} that document paths are relative to: every document outside "
                    f"{'it' if len(below) == 1 else 'them'} would be deleted. Give the root folder, or pass "
                    "--force to delete them anyway.")
    return None
