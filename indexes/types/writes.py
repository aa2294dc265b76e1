"""What goes into an index and what a write reports: change sets, chunks, ingest notes, generation sources."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from .documents import Document


@dataclass(frozen=True, slots=True)
class ChangeSet:
    """Upserts and deletes to apply to one index in one commit, all or nothing (`indexes.changes`).

    upserts: documents, each replacing the document of its id (unchanged revisions skipped).
    deletes: ids to delete. An id may appear once in the whole set (ValueError otherwise).
    replace: replace a document indexed from another source (`Document.source`).
    datasets: the datasets whose documents `deletes` may delete (None: any); a delete of a
    document of another dataset refuses the set.
    via: what wrote it ('console', 'api', 'sync', 'cli'; '' unknown) and originals: (doc_id,
    source text) of upserts read from a text the owner edits: both for `indexes.ledger` only.
    rewrite: write every upsert again even when its revision is unchanged (a re-index: chunked
    and analysed anew); reported 'updated'.
    """

    upserts: tuple[Document, ...] = ()
    deletes: tuple[str, ...] = ()
    replace: bool = False
    datasets: tuple[str, ...] | None = None
    via: str = ""
    originals: tuple[tuple[str, str], ...] = ()
    rewrite: bool = False

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for doc_id in [d.id for d in self.upserts] + list(self.deletes):
            if doc_id in seen:
                raise ValueError(f"id {doc_id!r} appears more than once in one change set")
            seen.add(doc_id)

    @property
    def ids(self) -> list[str]:
        """Every id the set touches: the upserts', then the deletes'."""
        return [d.id for d in self.upserts] + list(self.deletes)


@dataclass(frozen=True, slots=True)
class DocumentHead:
    """What an index holds about one document, read from its first chunk: revision (SHA-256
    hex, `indexes.records.document_revision`), dataset, path and source ('' when none)."""

    doc_id: str
    revision: str
    dataset: str = ""
    path: str = ""
    source: str = ""


@dataclass(slots=True)
class IngestReport:
    """What one write did (a `kbgate index add` run, a change set: `indexes.changes`).

    errors: (where, reason) for each file or record skipped because it failed (unreadable,
        malformed, over the size limit); any error makes `--delete-missing` not run. warnings:
        (where, message) for what was read but not indexed as given: a duplicate id overridden
        by a later record, an empty file skipped, `--delete-missing` not run. where: a file,
        "file:line" for a JSONL record, or an option name.
    changes: doc_id → 'added' | 'updated' | 'unchanged' | 'deleted' | 'absent' (a delete of an
        id the index did not hold). refused: doc_id → why the writer refused it (also a line of
        `errors`): 'dataset' (another dataset holds it, or a delete outside the datasets
        allowed), 'source' (indexed from another source), 'invalid' (a value it cannot store).
    commit: the opstamp (generation) of the commit made, None when none was made.
    """

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    chunks: int = 0
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    changes: dict[str, str] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)
    commit: int | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One indexed unit: a piece of one section of a document.

    n: 0-based position of the chunk within its document.
    heading: the heading of the section the chunk comes from ('' if none).
    text: the chunk body (plain text, characters of the section, in order).
    overlap: how many leading characters of `text` repeat the end of the previous
        chunk of the same section (0 for the first piece of a section); dropping
        them and concatenating the pieces gives the section text back.
    section: 0-based index of the section within the document.
    page: the page (`Section.page`) the chunk starts on, None where the format has none.
    """

    doc_id: str
    n: int
    heading: str
    text: str
    overlap: int = 0
    section: int = 0
    page: int | None = None

    def __post_init__(self) -> None:
        if self.n < 0 or not 0 <= self.overlap <= len(self.text):
            raise ValueError(f"Chunk {self.doc_id}#{self.n}: bad n or overlap {self.overlap}")


INGEST_ERROR_KINDS = ("unsupported", "encrypted", "no_text", "too_large", "corrupt", "unreadable", "invalid")
"""Why a file was not ingested: a type no converter reads, an encrypted file, a scanned image
without a text layer, over the size limit, a file its converter cannot parse, one that cannot
be read (permissions, not UTF-8), or a record or field refused (JSONL, front matter)."""


@dataclass(frozen=True, slots=True)
class _Note:
    """What an ingest reader says about a file: file (the path as given/walked), reason, line
    (1-based line number for JSONL, else None)."""

    file: str
    reason: str
    line: int | None = None

    @property
    def where(self) -> str:
        """'file' or 'file:line'."""
        return f"{self.file}:{self.line}" if self.line is not None else self.file

    def __str__(self) -> str:
        return f"{self.where}: {self.reason}"


@dataclass(frozen=True, slots=True)
class IngestError(_Note):
    """A file (or one JSONL line) that an ingest reader skipped. kind: why, for callers that
    map it to codes: one of INGEST_ERROR_KINDS ('' before a reader set one: an input error of
    another kind)."""

    kind: str = ""


@dataclass(frozen=True, slots=True)
class IngestWarning(_Note):
    """Something an ingest reader read but did not keep as given, and why: a file it did not
    turn into a document (it is empty, or a symlink to a file read under its own path), a
    publish_time read as milliseconds (`indexes.publish_time`), or a metadata field of a
    document it indexed without that field (`indexes.ingest.metadata`). Unlike an IngestError
    it does not stop `--delete-missing`: an empty file holds no document, so an earlier version
    of it is deleted like any document no longer present.
    """


class SourceMissing(Exception):
    """A `GenerationSource` holds no file at the path asked for (a 404, a missing file)."""


class GenerationSource(Protocol):
    """Where `indexes.fetch` reads published generations from: a store's root
    (`indexes.generations`), as a folder (`indexes.fetch.FolderSource`) or over HTTP(S)
    (`gateway.ops.replicas.HttpSource`).

    describe(): the store in words for messages, without credentials.
    read(path, write): stream the file at `path` (relative to the root, '/'-separated) into
    `write(block)` (which may raise to stop). Raises SourceMissing when there is no such file,
    OSError when the store cannot be read (a network failure, an HTTP error status).
    """

    def describe(self) -> str: ...

    def read(self, path: str, write: Callable[[bytes], None]) -> None: ...
