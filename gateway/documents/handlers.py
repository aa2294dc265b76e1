"""The document API's handlers: grant → index → body → documents → one commit → what changed.

Rationale: docs/design-notes.md, "gateway/documents/handlers.py".
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterable
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote_to_bytes

import anyio.to_thread
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from gateway.core.bodies import read_limited
from gateway.core.errors import AccessDenied, DependencyUnavailable, DocumentError
from gateway.core.frame import Call
from gateway.core.validate import clip, json_object
from gateway.documents.reading import (
    Read,
    batch_documents,
    file_document,
    json_document,
    source_text,
    upload_suffix,
    upload_types,
)
from gateway.documents.wire import Refused
from gateway.documents.writes import Writes, not_found
from indexes.changes import ChangeReport, document_head
from indexes.ingest.fields import length_problem
from indexes.store import RELOAD_CHECK_SECONDS
from indexes.types import ChangeSet, Document

GRANT = "documents.write"
JSON_TYPES = ("application/json", "text/json")
MAX_WARNINGS_PER_DOCUMENT = 20
"""Warnings listed per document in an answer; the rest are one "and N more" entry."""
MAX_WARNINGS = 200
"""Warnings listed per answer (entries, the "and N more" of a document included); the rest
are one "and N more" entry with id null."""
_TRUE = {"true": True, "false": False, "1": True, "0": False}


def writable(call: Call) -> str:
    """The index named by the request, once the client may write it. Raises AccessDenied."""
    policy = call.client.policy
    if GRANT not in policy.tools:
        raise AccessDenied("access.forbidden_tool", f"this client is not granted {GRANT}")
    name = str(call.request.path_params["index"])
    if name not in policy.write_indexes:
        raise AccessDenied("access.forbidden_scope", f"index {clip(name, 64)!r} is not one this client may write "
                                                     "(its policy's write_indexes)")
    call.event.extra["index"] = name
    return name


def _doc_id(call: Call) -> str:
    """The id of a GET, PUT or DELETE: the path's last part, UTF-8 once percent-decoded and at
    most MAX_ID_BYTES. Raises DocumentError (request_invalid)."""
    doc_id = str(call.request.path_params["doc_id"])
    if not doc_id:
        raise DocumentError("documents.request_invalid", "the document id (the last part of the path) is empty")
    # the server decodes the path replacing bytes that are not UTF-8 by U+FFFD, so %C0%AF and
    # %FF%FE would both be '\ufffd': one document. The raw bytes decide (the index, before
    # this, is one the policy names: the bytes that are not UTF-8 are the id's).
    raw = call.request.scope.get("raw_path")
    if isinstance(raw, bytes):
        try:
            unquote_to_bytes(raw.partition(b"?")[0]).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DocumentError("documents.request_invalid", "the document id (the last part of the path) is not "
                                                             f"UTF-8 once percent-decoded ({exc.reason}): ids are "
                                                             "Unicode text, never rewritten") from None
    problem = length_problem(doc_id)
    if problem is not None:
        raise DocumentError("documents.request_invalid", f"the document id {problem}")
    return doc_id


def _query(call: Call, allowed: Iterable[str]) -> dict[str, str]:
    """The query parameters, each at most once and among `allowed`."""
    params = call.request.query_params
    out: dict[str, str] = {}
    for key in params:
        if key not in allowed:
            raise DocumentError("documents.request_invalid", f"unknown query parameter {clip(key, 40)!r}")
        values = params.getlist(key)
        if len(values) != 1:
            raise DocumentError("documents.request_invalid", f"query parameter {key!r} appears more than once")
        out[key] = values[0]
    if "replace" in out and out["replace"].lower() not in _TRUE:
        raise DocumentError("documents.request_invalid", "replace must be true or false")
    return out


def _dataset_allowed(call: Call, dataset: str) -> bool:
    datasets = call.client.policy.datasets
    return datasets is None or dataset in datasets


def _check_upserts(call: Call, docs: Iterable[Document]) -> None:
    for doc in docs:
        if not _dataset_allowed(call, doc.dataset):
            raise AccessDenied("access.dataset_not_allowed", f"document {clip(doc.id, 80)!r} is of dataset "
                                                             f"{clip(doc.dataset, 40)!r}, outside this client's policy")


async def _body(call: Call) -> tuple[str, bytes]:
    """(media type, body): identity encoding, at most documents.max_body_bytes within
    documents.body_timeout_seconds. Raises DocumentError."""
    h = call.request.headers
    encoding = h.get("content-encoding")
    if encoding is not None and encoding.strip().lower() not in ("", "identity"):
        raise DocumentError("documents.media_unsupported", "Content-Encoding must be identity")
    media = (h.get("content-type") or "").partition(";")[0].strip().lower()
    cfg = call.cfg.documents
    return media, await read_limited(call.request.stream(), cfg.max_body_bytes, cfg.body_timeout_seconds,
                                     call.wire.invalid)


def _filename(disposition: str | None) -> str | None:
    """The filename= of a Content-Disposition header (RFC 6266), or None."""
    for part in (disposition or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "filename" and value:
            return value.strip().strip('"')
    return None


async def _multipart(call: Call, raw: bytes) -> tuple[str, str | None, bytes]:
    """(media type, filename, bytes) of the one part `file` of a multipart/form-data body (no
    other part)."""

    async def stream() -> AsyncGenerator[bytes, None]:
        yield raw

    parser = MultiPartParser(call.request.headers, stream(), max_files=1, max_fields=0, max_part_size=len(raw) + 1)
    try:
        form = await parser.parse()
    except MultiPartException as exc:
        raise DocumentError("documents.request_invalid", f"multipart body: {exc.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile) or len(form) != 1:
            raise DocumentError("documents.request_invalid", "a multipart body holds one part, named 'file'")
        return upload.content_type or "", upload.filename, await upload.read()
    finally:
        await form.close()


def _unsupported(media: str, filename: str | None) -> DocumentError:
    kinds = ", ".join(["application/json", "multipart/form-data", *sorted(upload_types())])
    named = f" for a file of type {clip(PurePosixPath(filename).suffix or '(none)', 20)!r}" if filename else ""
    return DocumentError("documents.media_unsupported", f"Content-Type {clip(media, 60)!r}{named} is not one the "
                                                        f"document API takes ({kinds}; or application/octet-stream "
                                                        "with a Content-Disposition filename of such a type)")


async def put(call: Call, writes: Writes) -> dict[str, Any]:
    """PUT a document (module doc)."""
    index, doc_id = writable(call), _doc_id(call)
    query = _query(call, ("replace", "dataset", "path"))
    writes.require(index)  # before the body is read: a mistyped index costs nothing
    media, raw = await _body(call)
    cfg = call.cfg.documents
    read: Read
    original: str | None = None
    if media in JSON_TYPES:
        if "dataset" in query or "path" in query:
            raise DocumentError("documents.request_invalid", "dataset= and path= are for files: a JSON document "
                                                             "carries its own")
        read = await anyio.to_thread.run_sync(lambda: json_document(json_object(raw, call.wire.invalid), doc_id, cfg,
                                                                    size=len(raw)))
    else:
        if media == "multipart/form-data":
            media, filename, raw = await _multipart(call, raw)
        else:
            filename = _filename(call.request.headers.get("content-disposition"))
        suffix = upload_suffix(media, filename)
        if suffix is None:
            raise _unsupported(media, filename)
        read = await anyio.to_thread.run_sync(lambda: file_document(
            raw, suffix, doc_id, cfg, dataset=query.get("dataset"), path=query.get("path")))
        original = source_text(raw, suffix)
    _check_upserts(call, [read[0]])
    changes = ChangeSet(upserts=(read[0],), replace=_TRUE[query.get("replace", "false").lower()],
                        datasets=call.client.policy.datasets, via="api",
                        originals=((doc_id, original),) if original is not None else ())
    return answer(call, index, changes, await writes.apply(index, changes), {doc_id: read[1]})


async def delete(call: Call, writes: Writes) -> dict[str, Any]:
    """DELETE a document (module doc)."""
    index, doc_id = writable(call), _doc_id(call)
    _query(call, ())
    changes = ChangeSet(deletes=(doc_id,), datasets=call.client.policy.datasets, via="api")
    await _check_deletes(call, index, changes.deletes)
    if not writes.exists(index):
        return answer(call, index, changes, ChangeReport(), {})
    return answer(call, index, changes, await writes.apply(index, changes), {})


async def batch(call: Call, writes: Writes) -> dict[str, Any]:
    """POST a batch: upserts and deletes in one commit, or none (module doc)."""
    index = writable(call)
    _query(call, ())
    media, raw = await _body(call)
    if media not in JSON_TYPES:
        raise DocumentError("documents.media_unsupported", "a batch is JSON: send Content-Type: application/json")
    body = json_object(raw, call.wire.invalid)
    f = call.fields(body, "batch")
    f.only({"upserts", "deletes", "replace"})
    upserts, deletes = body.get("upserts", []), body.get("deletes", [])
    if not isinstance(upserts, list) or not all(isinstance(u, dict) for u in upserts):
        raise DocumentError("documents.request_invalid", "upserts must be an array of JSON documents (objects)")
    if not isinstance(deletes, list) or not all(isinstance(d, str) and d for d in deletes):
        raise DocumentError("documents.request_invalid", "deletes must be an array of document ids (non-empty strings)")
    for i, doc_id in enumerate(deletes):
        if (problem := length_problem(doc_id)) is not None:
            raise DocumentError("documents.request_invalid", f"deletes[{i}]: the document id {problem}")
    replace = f.boolean("replace", False)
    total, most = len(upserts) + len(deletes), call.cfg.documents.max_batch_documents
    if not total or total > most:
        raise DocumentError("documents.request_invalid", f"a batch holds 1 to {most} upserts and deletes, not {total}"
                                                         " (documents.max_batch_documents)")
    cfg = call.cfg.documents
    reads = await anyio.to_thread.run_sync(lambda: batch_documents(upserts, cfg))
    try:
        changes = ChangeSet(upserts=tuple(doc for doc, _ in reads), deletes=tuple(deletes), replace=replace,
                            datasets=call.client.policy.datasets, via="api")
    except ValueError as exc:  # an id twice
        raise DocumentError("documents.request_invalid", str(exc)) from None
    _check_upserts(call, changes.upserts)
    await _check_deletes(call, index, changes.deletes)
    if not writes.exists(index):
        if changes.upserts:
            raise not_found(index)
        return answer(call, index, changes, ChangeReport(), {})
    return answer(call, index, changes, await writes.apply(index, changes), {d.id: w for d, w in reads})


async def get(call: Call, writes: Writes) -> dict[str, Any]:
    """GET a document's revision (module doc)."""
    index, doc_id = writable(call), _doc_id(call)
    _query(call, ())
    if not writes.exists(index):
        raise DocumentError("documents.not_found", f"index {index!r} holds no document yet")
    try:
        idx = call.rt.index(index)
    except DependencyUnavailable:
        raise DocumentError("documents.index_unavailable", f"index {index!r} cannot be read") from None
    found = await anyio.to_thread.run_sync(document_head, idx, doc_id)
    if found is None:
        raise DocumentError("documents.not_found", f"index {index!r} holds no document {clip(doc_id, 80)!r}")
    if not _dataset_allowed(call, found.head.dataset):
        raise AccessDenied("access.dataset_not_allowed", f"document {clip(doc_id, 80)!r} is of a dataset outside "
                                                         "this client's policy")
    at = found.applied_at
    return {"index": index, "id": doc_id, "revision": found.head.revision, "dataset": found.head.dataset,
            "path": found.head.path, "commit": found.generation, "appliedCommit": found.applied_commit,
            "appliedAt": None if at is None else _rfc3339(at)}


async def _check_deletes(call: Call, index: str, ids: tuple[str, ...]) -> None:
    """Deletes of documents outside the policy's datasets are denied before the write (and
    again by the writer under its lock: `ChangeSet.datasets`)."""
    if not ids or call.client.policy.datasets is None or not call.rt.indexes.exists(index):
        return
    try:
        idx = call.rt.index(index)
    except DependencyUnavailable:
        return  # the writer's own check decides
    heads = await anyio.to_thread.run_sync(idx.heads, ids)
    for doc_id, head in heads.items():
        if not _dataset_allowed(call, head.dataset):
            raise AccessDenied("access.dataset_not_allowed", f"document {clip(doc_id, 80)!r} is of a dataset outside "
                                                             "this client's policy")


def answer(call: Call, index: str, changes: ChangeSet, report: ChangeReport,
           warnings: dict[str, list[str]]) -> dict[str, Any]:
    """The answer to a write (`outcome`), its commit and counts noted on the request's audit
    line. Raises the refusal of a change set the writer refused (nothing was written then)."""
    out = outcome(index, changes, report, warnings)
    call.event.extra.update(commit=report.commit, **{k: v for k, v in out["counts"].items() if v})
    return out


def outcome(index: str, changes: ChangeSet, report: ChangeReport, warnings: dict[str, list[str]]) -> dict[str, Any]:
    """What became of each id of a write, and the commit that holds it: {index, commit,
    committed, visibleWithinSeconds, counts, documents: [{id, change, revision}], warnings}
    (the document API's answer; the console shows the same). Raises AccessDenied or Refused
    for a change set the writer refused (nothing was written then)."""
    if report.refused:
        deleted = set(changes.deletes)
        for r in report.refused:
            if r.kind == "dataset" and r.doc_id in deleted:
                raise AccessDenied("access.dataset_not_allowed", f"document {clip(r.doc_id, 80)!r} is of a dataset "
                                                                 "outside this client's policy")
        items = [(r.doc_id, "documents.document_invalid" if r.kind == "invalid" else "documents.document_conflict",
                  _refusal(r.doc_id, r.kind, r.reason)) for r in report.refused]
        raise Refused(items[0][1], items)
    documents = [{"id": c.doc_id, "change": c.change, "revision": c.revision} for c in report.changes] or [
        {"id": i, "change": "absent", "revision": None} for i in changes.deletes]
    # the writer's own warnings: in a change set only "replaces … from <its source file>" (replace=true),
    # said here without the server's file
    said = [(where, "replaced a document indexed from another source (replace=true)" if m.startswith("replaces ")
             else m) for where, m in report.warnings]
    notes = capped_warnings([*warnings.items(), *((where, [m]) for where, m in said)])
    counts = {k: sum(d["change"] == k for d in documents) for k in ("added", "updated", "unchanged", "deleted",
                                                                     "absent")}
    return {"index": index, "commit": report.generation, "committed": report.commit is not None,
            "visibleWithinSeconds": RELOAD_CHECK_SECONDS, "counts": counts, "documents": documents,
            "warnings": notes}


def capped_warnings(warnings: Iterable[tuple[str, list[str]]]) -> list[dict[str, str | None]]:
    """The answer's warnings ({id, message}) from (id, messages) pairs: at most
    MAX_WARNINGS_PER_DOCUMENT per id, then one "and N more" entry for it; at most MAX_WARNINGS
    in all, then one "and N more" entry with id null (N counts the warnings left out)."""
    listed: list[tuple[str | None, str, int]] = []  # (id, message, how many warnings it stands for)
    for doc_id, messages in warnings:
        listed += [(doc_id, m, 1) for m in messages[:MAX_WARNINGS_PER_DOCUMENT]]
        if (more := len(messages) - MAX_WARNINGS_PER_DOCUMENT) > 0:
            listed.append((doc_id, f"and {more} more warnings about this document (at most "
                                   f"{MAX_WARNINGS_PER_DOCUMENT} are listed per document)", more))
    if len(listed) > MAX_WARNINGS:
        more = sum(n for _, _, n in listed[MAX_WARNINGS:])
        listed = [*listed[:MAX_WARNINGS], (None, f"and {more} more warnings (at most {MAX_WARNINGS} are listed "
                                                 "per answer)", more)]
    return [{"id": doc_id, "message": m} for doc_id, m, _ in listed]


def _refusal(doc_id: str, kind: str, reason: str) -> str:
    """A writer's refusal as the API says it: naming no file of the server, nor another dataset."""
    if kind == "source":
        return (f"document {doc_id!r} was indexed from another source (a file of kbgate index add, or a sync): "
                "refused; send replace=true to replace it")
    if kind == "dataset":  # the writer's reason names the other dataset: not this client's to know
        return f"document {doc_id!r} is a document of another dataset in the index: refused (give each dataset " \
               "its own ids)"
    return reason


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
