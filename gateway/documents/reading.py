"""Requests → Documents, by the rules `kbgate index add` applies (issue 20: "validated exactly as
index add validates"): nothing here re-implements a rule of `indexes.ingest`, it hands the
request's content to the same readers.

- A JSON document is one JSONL record (`indexes.ingest.jsonl.read_record`: id, title,
  content/text, url, summary, publish_time, cover_image, path, dataset, qa_visible, every other
  field kept as metadata or reported), its size the JSON's bytes, bounded by
  `indexes.max_document_bytes`. Its `id`, when given, must be the URL's.
- An uploaded file is read by `indexes.ingest.read_file` under the suffix its type names, so
  every format the ingest layer reads (Markdown with front matter, HTML, text, and whatever
  formats it gains) is taken here without a change; its id is that of `index add`:
  `dataset:path`, or `path` without a dataset (`indexes.ingest.document_id`), and must be the
  URL's. `path` defaults to the URL's id (without `dataset:`).
- Every document written through the API has the source API_SOURCE: `kbgate index add` then
  refuses to replace it from a file without `--replace`, and the API refuses to replace a
  document indexed from a file without `replace=true` (`indexes.writer.ingest`).

Every problem of a document is an (id, code, message) item of `wire.Refused`; a request with
any is refused whole. Warnings (a field not kept, a publish_time read as milliseconds) are
returned with the document. Blocking (file conversion): run these off the event loop.
"""

from __future__ import annotations

import dataclasses
import mimetypes
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from gateway.core.config import DocumentsConfig
from gateway.core.errors import DocumentError
from gateway.documents.wire import Refused
from indexes.ingest import SUFFIXES, read_file
from indexes.ingest.jsonl import read_record
from indexes.types import Document, IngestError, IngestWarning

API_SOURCE = "document-api"
"""`Document.source` of every document the API writes (module doc)."""

NOT_UPLOADS = frozenset({".jsonl"})  # many records in one file: send them as a batch
EXTRA_TYPES = {"text/x-markdown": ".md", "application/xhtml+xml": ".html"}

Read = tuple[Document, list[str]]
"""A document and its warnings."""


def upload_types() -> dict[str, str]:
    """Media type → suffix of every file type an upload may be: the ingest layer's suffixes
    (`indexes.ingest.SUFFIXES`, but .jsonl) as `mimetypes` names them, plus EXTRA_TYPES."""
    out = {t: s for t, s in EXTRA_TYPES.items() if s in SUFFIXES}
    for suffix in sorted(SUFFIXES - NOT_UPLOADS):
        mime = mimetypes.guess_type("f" + suffix, strict=False)[0]
        if mime is not None:
            out.setdefault(mime, suffix)
    return out


def upload_suffix(content_type: str | None, filename: str | None = None) -> str | None:
    """The suffix a file is read under: its filename's when that is one the ingest layer reads
    (`application/octet-stream` with `filename=` in Content-Disposition, a multipart part),
    else its media type's; None when neither names a readable type."""
    if filename:
        suffix = Path(filename).suffix.lower()
        if suffix in SUFFIXES and suffix not in NOT_UPLOADS:
            return suffix
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
            refused.append((doc_id, code, f"document {doc_id!r}: {item.reason}"))
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
        raise Refused("documents.document_invalid", refused)
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
    with tempfile.TemporaryDirectory(prefix="kbgate-upload-") as folder:
        file = Path(folder) / ("upload" + suffix)
        file.write_bytes(raw)
        doc, warnings, refused = _items(doc_id, read_file(file, path, max_document_bytes=cfg.max_document_bytes,
                                                          dataset=dataset or None))
    if refused or doc is None:
        raise Refused("documents.document_invalid", refused)
    if doc.id != doc_id:
        raise DocumentError("documents.request_invalid", f"this file is document {doc.id!r} (its dataset and path, "
                                                         "as kbgate index add names it): send it to that id, or "
                                                         "give path= and dataset=")
    return dataclasses.replace(doc, source=API_SOURCE, origin=doc_id), warnings


def batch_documents(records: list[dict[str, Any]], cfg: DocumentsConfig) -> list[Read]:
    """The upserts of a batch: each a JSON document for its own `id` (required). Raises Refused
    naming every document refused (the batch is refused whole)."""
    out: list[Read] = []
    refused: list[tuple[str, str, str]] = []
    for i, record in enumerate(records):
        raw_id = record.get("id")
        if not isinstance(raw_id, str | int) or isinstance(raw_id, bool) or str(raw_id) == "":
            refused.append((f"upserts[{i}]", "documents.document_invalid",
                            f"upserts[{i}]: missing or invalid 'id' (non-empty string or integer)"))
            continue
        try:
            out.append(json_document(record, str(raw_id), cfg))
        except Refused as err:
            refused.extend(err.items)
    if refused:
        raise Refused("documents.document_invalid", refused)
    return out
