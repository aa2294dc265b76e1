"""JSON Lines reader: one document per line.

Rationale: docs/design-notes.md, "indexes/ingest/jsonl.py".
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..paths import document_problem
from ..types import Document, IngestError, IngestWarning, Section
from .clean import clean_document
from .fields import dataset_problem, id_problem, parse_cover_image, parse_publish_time, parse_qa_visible
from .metadata import keep_metadata

__all__ = ["RESERVED", "read_jsonl", "read_record", "record_to_document", "too_large"]

# Record keys with a meaning of their own (not kept as metadata).
RESERVED = frozenset({"id", "title", "content", "text", "url", "summary", "publish_time", "cover_image", "path",
                      "dataset", "qa_visible"})


def too_large(size: int, limit: int) -> str:
    """The reason given for a document of `size` bytes over `limit` bytes."""
    return (f"{size} bytes is over the maximum document size of {limit} bytes "
            "(indexes.max_document_bytes, or kbgate index add --max-document-bytes)")


def record_to_document(record: dict[str, Any], where: str = "", line: int | None = None,
                       warnings: list[IngestWarning] | None = None) -> Document:
    """One JSON object → Document with its kept metadata. Raises ValueError naming the bad field.

    where / line: the record's source, for the warnings appended to `warnings` (a publish_time
    read as milliseconds, one per field not kept as metadata; dropped when `warnings` is None).
    A publish_time that is no time (`indexes.publish_time`) raises ValueError: the record is refused.
    """
    if not isinstance(record, dict):
        raise ValueError("line is not a JSON object")
    raw_id = record.get("id")
    if not isinstance(raw_id, (str, int)) or isinstance(raw_id, bool) or str(raw_id) == "":
        raise ValueError("missing or invalid 'id' (non-empty string or integer)")
    content = record.get("content", record.get("text", ""))
    title = record.get("title") or ""
    if not isinstance(content, str) or not isinstance(title, str):
        raise ValueError("'title' and 'content' must be strings")
    for key in ("path", "dataset"):  # who may see it: a wrong one refuses the record
        if record.get(key) is not None and not isinstance(record[key], str):
            raise ValueError(f"'{key}' must be a string")
    # an identity is never rewritten (rewriting could merge two documents): refused instead
    for key, name in (("id", str(raw_id)), ("path", record.get("path") or "")):
        if (problem := id_problem(name)) is not None:
            raise ValueError(f"'{key}' {problem}")
    if (problem := document_problem(str(raw_id), record.get("path") or "")) is not None:
        raise ValueError(problem)  # a '..' walk out of a scope's tree (indexes.paths)
    if (problem := dataset_problem(record.get("dataset") or "")) is not None:
        raise ValueError(f"'dataset' {problem}")
    dropped: list[IngestWarning] = []  # what a caller sees: a wrong one is not kept, the record indexed
    shown = dict(record)
    for key in ("url", "summary"):
        if shown.get(key) is not None and not isinstance(shown[key], str):
            dropped.append(IngestWarning(where, f"'{key}' must be a string: not kept", line))
            shown[key] = None
    try:
        cover = parse_cover_image(record.get("cover_image"))
    except ValueError as exc:
        dropped.append(IngestWarning(where, f"{exc}: not kept", line))
        cover = None
    seconds, converted = parse_publish_time(record.get("publish_time"))
    kept, notes = keep_metadata(record, RESERVED, where, line)
    if warnings is not None:
        warnings.extend(dropped)
        if converted is not None:
            warnings.append(IngestWarning(where, converted, line))
        warnings.extend(notes)
    return Document(
        id=str(raw_id),
        title=title.strip(),
        sections=(Section("", content.strip()),),
        url=shown.get("url") or None,
        summary=shown.get("summary") or None,
        publish_time=seconds,
        cover_image=cover,
        path=record.get("path") or "",
        dataset=record.get("dataset") or "",
        qa_visible=parse_qa_visible(record.get("qa_visible", True)),
        metadata=kept,
    )


def read_jsonl(path: Path, *, display: str | None = None,
               max_document_bytes: int | None = None) -> Iterator[Document | IngestError | IngestWarning]:
    """Documents of a .jsonl file; a bad line becomes an IngestError with its line number.

    Blank lines are skipped; a file with no other line is one IngestWarning. Undecodable
    UTF-8 fails the whole file (one error, line None) since the lines before it were
    already yielded. max_document_bytes: longest record accepted (None: no limit).
    Each Document's origin is "file:line".
    """
    name = display or str(path)
    records = 0
    try:
        with path.open("r", encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                records += 1
                if max_document_bytes is not None and len(line) * 4 > max_document_bytes:
                    size = len(line.rstrip("\r\n").encode("utf-8"))
                    if size > max_document_bytes:
                        yield IngestError(name, too_large(size, max_document_bytes), lineno, kind="too_large")
                        continue
                notes: list[IngestWarning] = []
                try:
                    doc = record_to_document(json.loads(line), name, lineno, notes)
                except (ValueError, TypeError) as exc:
                    yield IngestError(name, f"bad JSON record: {exc}", lineno, kind="invalid")
                    continue
                yield dataclasses.replace(doc, origin=f"{name}:{lineno}")
                yield from notes
        if not records:
            yield IngestWarning(name, "empty file (only whitespace): skipped")
    except UnicodeDecodeError as exc:
        yield IngestError(name, f"not UTF-8: {exc.reason} at byte {exc.start}", kind="unreadable")
    except OSError as exc:
        yield IngestError(name, f"cannot read: {exc.strerror or exc}", kind="unreadable")


def read_record(record: Any, where: str, *, size: int,
                max_document_bytes: int | None = None) -> Iterator[Document | IngestError | IngestWarning]:
    """One record (a parsed JSON object) exactly as `kbgate index add` reads a line of a .jsonl
    file: over `max_document_bytes` (size: the record's bytes) or refused by `record_to_document`
    it is one IngestError; else the Document, cleaned as `indexes.ingest.read_file` cleans it
    (`indexes.ingest.clean`), with origin `where`, then its IngestWarnings. For writers that get
    records another way than a file (the document API). Never raises."""
    if max_document_bytes is not None and size > max_document_bytes:
        yield IngestError(where, too_large(size, max_document_bytes), kind="too_large")
        return
    notes: list[IngestWarning] = []
    try:
        doc = record_to_document(record, where, None, notes)
    except (ValueError, TypeError) as exc:
        yield IngestError(where, f"bad JSON record: {exc}", kind="invalid")
        return
    doc, cleaned = clean_document(dataclasses.replace(doc, origin=where))
    yield doc
    yield from notes
    yield from cleaned
