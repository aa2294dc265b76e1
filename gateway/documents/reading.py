"""Requests → Documents, by the rules `kbgate index add` applies ("validated exactly as
index add validates"): nothing here re-implements a rule of `indexes.ingest`, it hands the
request's content to the same readers.

Rationale: docs/design-notes.md, "gateway/documents/reading.py".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from gateway.core.config import DocumentsConfig
from gateway.core.errors import DocumentError
from gateway.documents.wire import Refused
from indexes.ingest import read_data
from indexes.ingest.fields import length_problem
from indexes.ingest.formats import FORMATS, format_of
from indexes.ingest.jsonl import read_record
from indexes.paths import path_problem
from indexes.types import Document, IngestError, IngestWarning

API_SOURCE = "document-api"
"""`Document.source` of every document the API writes (module doc)."""

KIND_CODES = {"unsupported": "documents.media_unsupported", "too_large": "documents.document_too_large"}
"""A reader's IngestError.kind (`indexes.types.INGEST_ERROR_KINDS`) → the code of the document it
refuses; every other kind (encrypted, no_text, corrupt, unreadable, invalid) is
documents.document_invalid."""

Read = tuple[Document, list[str]]
"""A document and its warnings."""


def upload_types() -> dict[str, str]:
    """Media type → suffix of every file type an upload may be: the format registry's
    (`indexes.ingest.formats.FORMATS`: Markdown, HTML, text, PDF, DOCX, PPTX, XLSX,
    reStructuredText). JSON Lines is none: many records in one file are sent as a batch."""
    return {t: f.suffixes[0] for f in FORMATS for t in f.media_types}


TEXT_SUFFIXES = (".md", ".markdown", ".txt")  # sources kept as written, for the console's editor


def source_text(raw: bytes, suffix: str) -> str | None:
    """The text a Markdown or plain-text file was read from (newlines as \\n), to keep beside
    the index (`indexes.ledger`); None for other formats or bytes that are not UTF-8."""
    if suffix.lower() not in TEXT_SUFFIXES:
        return None
    try:
        return raw.decode("utf-8-sig").replace("\r\n", "\n")
    except UnicodeDecodeError:
        return None


def upload_suffix(content_type: str | None, filename: str | None = None) -> str | None:
    """The suffix a file is read under: its filename's when the registry reads that
    (`application/octet-stream` with `filename=` in Content-Disposition, a multipart part),
    else its media type's; None when neither names a format the registry reads."""
    if filename and format_of(filename) is not None:
        return Path(filename).suffix.lower()
    mime = (content_type or "").partition(";")[0].strip().lower()
    return upload_types().get(mime)


def _items(doc_id: str, items: Iterable[Document | IngestError | IngestWarning],
           code: str = "documents.document_invalid") -> tuple[Document | None, list[str], list[tuple[str, str, str]]]:
    docs: list[Document] = []
    warnings: list[str] = []
    refused: list[tuple[str, str, str]] = []
    for item in items:
        if isinstance(item, Document):
            docs.append(item)
        elif isinstance(item, IngestError):
            refused.append((doc_id, KIND_CODES.get(item.kind, code), f"document {doc_id!r}: {item.reason}"))
        else:
            warnings.append(item.reason)
    if not docs and not refused:
        refused.append((doc_id, code, f"document {doc_id!r} holds no document: {'; '.join(warnings) or 'empty'}"))
    return (docs[0] if docs else None), warnings, refused


def json_document(record: dict[str, Any], doc_id: str, cfg: DocumentsConfig, *, size: int | None = None) -> Read:
    """A JSON document (a JSONL record) for `doc_id`. size: its bytes (default: its compact
    JSON). Raises Refused (documents.request_invalid for an id that is not the URL's,
    documents.document_invalid for anything `kbgate index add` refuses)."""
    given = record.get("id")
    if given is not None and (not isinstance(given, str | int) or isinstance(given, bool) or str(given) != doc_id):
        raise Refused("documents.request_invalid",
                      [(doc_id, "documents.request_invalid", f"the document's id is not {doc_id!r}, the id it is "
                                                              "sent to (leave it out, or send it to its own id)")])
    record = {**record, "id": doc_id}
    if size is None:
        size = len(orjson.dumps(record))
    doc, warnings, refused = _items(doc_id, read_record(record, doc_id, size=size,
                                                         max_document_bytes=cfg.max_document_bytes))
    if refused or doc is None:
        raise Refused(refused[0][1], refused)
    return dataclasses.replace(doc, source=API_SOURCE), warnings


def file_document(raw: bytes, suffix: str, doc_id: str, cfg: DocumentsConfig, *, dataset: str | None = None,
                  path: str | None = None) -> Read:
    """An uploaded file (its bytes, read as `suffix`) for `doc_id`. dataset: of a document that
    names none itself (`index add --dataset`); path: its tree path (default: the id without
    `dataset:`). Raises Refused (module doc)."""
    if path is None:
        prefix = f"{dataset}:" if dataset else ""
        if not doc_id.startswith(prefix):
            raise DocumentError("documents.request_invalid", f"the id of a file of dataset {dataset!r} is "
                                                             f"'{prefix}<path>' (or give path=)")
        path = doc_id[len(prefix):]
    elif (problem := path_problem(path)) is not None:  # else read as the id made of it, and named 'id'
        raise DocumentError("documents.document_invalid", f"path= {problem}")
    fmt = format_of("upload" + suffix)
    media_type = fmt.media_types[0] if fmt is not None else None  # the format named, whatever the path's suffix
    doc, warnings, refused = _items(doc_id, read_data(raw, path, media_type=media_type, dataset=dataset or None,
                                                      max_document_bytes=cfg.max_document_bytes,
                                                      bounds=cfg.read_bounds))
    if refused or doc is None:
        raise Refused(refused[0][1], refused)
    if doc.id != doc_id:
        said = "path= and dataset=" if path is not None else "its path= and dataset="
        raise DocumentError("documents.request_invalid", f"with {said} this file is document {doc.id!r} (a file's "
                                                         "id is its dataset and path, as kbgate index add names it), "
                                                         f"not {doc_id!r}: send it to {doc.id!r}, or give the path= "
                                                         f"and dataset= that make {doc_id!r}")
    return dataclasses.replace(doc, source=API_SOURCE, origin=doc_id), warnings


def batch_documents(records: list[dict[str, Any]], cfg: DocumentsConfig) -> list[Read]:
    """The upserts of a batch: each a JSON document for its own `id` (required, at most
    `indexes.ingest.fields.MAX_ID_BYTES`: one over it is named `upserts[i]`). Raises Refused
    naming every document refused (the batch is refused whole)."""
    out: list[Read] = []
    refused: list[tuple[str, str, str]] = []
    for i, record in enumerate(records):
        raw_id = record.get("id")
        if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or str(raw_id) == "":
            refused.append((f"upserts[{i}]", "documents.document_invalid",
                            f"upserts[{i}]: missing or invalid 'id' (non-empty string or integer)"))
            continue
        if (problem := length_problem(str(raw_id))) is not None:  # named by its place, not echoed
            refused.append((f"upserts[{i}]", "documents.document_invalid", f"upserts[{i}]: 'id' {problem}"))
            continue
        try:
            out.append(json_document(record, str(raw_id), cfg))
        except Refused as err:
            refused.extend(err.items)
    if refused:
        raise Refused(refused[0][1], refused)
    return out
