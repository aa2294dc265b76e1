"""Documents changed from the browser through the document API's own code: its readers
(gateway.documents.reading), its one queue and writer per index (app.state.document_writes)
and its answer (handlers.outcome); no rule of its own about what a document may be.

Rationale: docs/design-notes.md, "gateway/console/doc_writes.py".
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote, urlencode

import anyio.to_thread
import orjson
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import doc_batch
from gateway.console.changes import audit_change
from gateway.console.csrf import FIELD, post_ok
from gateway.console.gaps.store import days_back
from gateway.console.i18n import _
from gateway.console.links import document_url, index_url
from gateway.console.render import Answered, gate, message, read_form, refusal, runtime, see_other
from gateway.console.users import ConsoleUser, can
from gateway.core.bodies import read_limited
from gateway.core.errors import AgentError, DependencyUnavailable
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError
from gateway.documents.handlers import outcome
from gateway.documents.reading import file_document, source_text, upload_suffix, upload_types
from gateway.documents.wire import Refused
from gateway.documents.writes import Writes
from indexes import ledger
from indexes.changes import ChangeReport
from indexes.errors import IndexStoreError
from indexes.types import ChangeSet, Document

FORM = "documents"
REPORT_COOKIE = "kbgate_report"
REPORT_PATH = "/admin/indexes"
MAX_FILES = 100  # files an upload form may carry (documents.max_body_bytes bounds their total)
MAX_REPORT_BYTES = 3000
EDITABLE = (".md", ".markdown", ".txt")
UPLOAD_ACCEPT = ",".join(sorted(set(upload_types().values()) | {".markdown", ".htm", ".txt"}))


def days(rt: Runtime) -> list[str]:
    """The UTC days the served counts cover (gaps.keep_days, today first)."""
    return days_back(rt.clock.now(), rt.config.gaps.keep_days)


def editable(path: str) -> bool:
    """A document the browser edits in place: a Markdown or text file's."""
    return PurePosixPath(path).suffix.lower() in EDITABLE


def edit_url(index: str, doc_id: str) -> str:
    """The edit form of `doc_id`."""
    return f"{REPORT_PATH}/{quote(index, safe='')}/edit?{urlencode({'id': doc_id})}"


# ---- the report carried across the redirect ------------------------------------------------


def _clip(text: str, n: int = 300) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


def _report_cookie(report: dict[str, Any]) -> str:
    """The report as a cookie value (base64url JSON), cut to fit MAX_REPORT_BYTES."""
    items = report.get("items", [])
    for keep in (MAX_FILES, 8, 3, 1, 0):
        trimmed = {**report, "items": [{**i, "warnings": i.get("warnings", [])[:3]} for i in items[:keep]],
                   "more": max(len(items) - keep, 0)}
        raw = base64.urlsafe_b64encode(orjson.dumps(trimmed)).decode("ascii")
        if len(raw) <= MAX_REPORT_BYTES:
            return raw
    return base64.urlsafe_b64encode(orjson.dumps({"action": report.get("action", ""), "items": [],
                                                   "more": len(items)})).decode("ascii")


def take_report(request: Request) -> dict[str, Any] | None:
    """The report of the change just made (its cookie), or None."""
    raw = request.cookies.get(REPORT_COOKIE)
    if not raw:
        return None
    try:
        got = orjson.loads(base64.urlsafe_b64decode(raw.encode("ascii")))
    except (ValueError, orjson.JSONDecodeError):
        return None
    return got if isinstance(got, dict) else None


def clear_report(response: Response) -> Response:
    """`response` with the report cookie removed (a report is shown once)."""
    response.delete_cookie(REPORT_COOKIE, path=REPORT_PATH, httponly=True, samesite="strict")
    return response


def _done(url: str, report: dict[str, Any]) -> Response:
    response = see_other(url)
    response.set_cookie(REPORT_COOKIE, _report_cookie(report), max_age=300, path=REPORT_PATH, httponly=True,
                        samesite="strict", secure=False)
    return response


# ---- the gate and the write -----------------------------------------------------------------


async def _allowed(request: Request, action: str) -> tuple[ConsoleUser, str]:
    """(the user, the index) when they may change the index's documents; else the refusal
    (audited when logged in), before any body is read."""
    user = await gate(request, "view", active="indexes")
    index = str(request.path_params["index"])
    if not can(user, "edit_documents", index):
        audit_change(runtime(request).config, user.name, f"documents.{action}", index, status=403)
        raise Answered(refusal(request, user, as_json=False, status=403, active="indexes",
                               text=_("Your role (%(role)s) does not allow changing the documents of index %(index)s; "
                                      "nothing was changed. Ask an admin or the index's owner.", role=user.role_label,
                                      index=index)))
    return user, index


def _writes(request: Request) -> Writes:
    writes: Writes = request.app.state.document_writes
    return writes


async def _commit(request: Request, user: ConsoleUser, action: str, index: str, changes: ChangeSet,
                  warnings: dict[str, list[str]], **extra: Any) -> tuple[dict[str, Any] | None, str]:
    """Apply `changes` through the document API's writes; (its outcome, '') or (None, why not).
    Audited either way, with `extra` (counts, never text) on the line."""
    rt = runtime(request)
    ids = [d.id for d in changes.upserts] + list(changes.deletes)
    try:
        writes = _writes(request)
        report = ChangeReport() if not changes.upserts and not writes.exists(index) else \
            await writes.apply(index, changes)
        out = outcome(index, changes, report, warnings)
    except Refused as exc:
        audit_change(rt.config, user.name, f"documents.{action}", index, status=exc.status, ids=ids[:50],
                     code=exc.code, **extra)
        return None, "; ".join(_clip(m) for _, _, m in exc.items[:5])
    except AgentError as exc:
        audit_change(rt.config, user.name, f"documents.{action}", index, status=exc.status, ids=ids[:50],
                     code=exc.code, **extra)
        return None, _clip(exc.message)
    audit_change(rt.config, user.name, f"documents.{action}", index, ids=ids[:50], commit=report.commit,
                 **{k: v for k, v in out["counts"].items() if v}, **extra)
    return out, ""


def _items(out: dict[str, Any] | None, error: str, names: dict[str, str],
           warnings: dict[str, list[str]]) -> list[dict[str, Any]]:
    if out is None:
        return [{"name": name, "id": doc_id, "change": "refused", "problem": error, "warnings": []}
                for doc_id, name in names.items()]
    return [{"name": names.get(d["id"], d["id"]), "id": d["id"], "change": d["change"], "problem": "",
             "warnings": [_clip(w) for w in warnings.get(d["id"], [])]} for d in out["documents"]]


# ---- upload ---------------------------------------------------------------------------------


async def _multipart(request: Request, rt: Runtime) -> Any:
    raw = await read_limited(request.stream(), rt.config.documents.max_body_bytes,
                             rt.config.documents.body_timeout_seconds)

    async def stream() -> AsyncGenerator[bytes, None]:
        yield raw

    return await MultiPartParser(request.headers, stream(), max_files=MAX_FILES, max_fields=8,
                                 max_part_size=64 * 1024).parse()


def _folder(value: str) -> str:
    parts = [p for p in value.replace("\\", "/").split("/") if p]
    return "/".join(parts) + "/" if parts else ""


async def upload(request: Request) -> Response:
    """POST /admin/indexes/{index}/upload (module doc)."""
    user, index = await _allowed(request, "upload")
    rt = runtime(request)
    if not _writes(request).exists(index):  # before the body: an upload never creates an index
        audit_change(rt.config, user.name, "documents.upload", index, status=404)
        return message(request, user, _("Upload refused"), _(
            "No index is named %(index)s: an upload never creates one (check the name; an admin creates an index on "
            "the Indexes page, or with kbgate index create). Nothing was written.", index=index),
            status=404, active="indexes", back="/admin/indexes")
    if not (request.headers.get("content-type") or "").startswith("multipart/form-data"):
        return _upload_refused(request, user, index, _("Send the upload form."), 400)
    try:
        form = await _multipart(request, rt)
    except ProblemError as exc:
        big = exc.problem.kind == "too_large"
        return _upload_refused(request, user, index, _("The upload is larger than documents.max_body_bytes "
                               "(%(n)s bytes).", n=rt.config.documents.max_body_bytes) if big
                               else _("The upload did not arrive in time."), 413 if big else 408)
    except MultiPartException as exc:
        return _upload_refused(request, user, index, _("The upload form is not readable (%(problem)s).",
                                                                problem=exc.message), 400)
    try:
        token = form.get(FIELD)
        if not post_ok(request, token if isinstance(token, str) else None, FORM):
            return _upload_refused(request, user, index, _("This form expired or came from another site: open "
                                   "the page again and resubmit."), 403, heading=_("Form refused"))
        files = [f for f in form.getlist("file") if isinstance(f, UploadFile) and f.filename]
        if not files:
            return _upload_refused(request, user, index, _("Choose one or more files to upload."), 400,
                                   back=index_url(index))
        dataset = str(form.get("dataset") or "").strip()
        folder = _folder(str(form.get("folder") or ""))
        replace = form.get("replace") == "1"
        uploads = [(f.filename or "", f.content_type, await f.read()) for f in files]
    finally:
        await form.close()
    originals: dict[str, str] = {}  # doc_id → the Markdown or text as uploaded (indexes.ledger)
    items, docs, warnings, names = await anyio.to_thread.run_sync(_read_files, rt, uploads, dataset, folder,
                                                                  originals)
    out: dict[str, Any] | None = None
    refused = {"refused": len(items)} if items else {}  # files the reader refused: counted on the audit line
    try:
        changes = ChangeSet(upserts=tuple(docs), replace=replace, via="console",
                            originals=tuple(originals.items())) if docs else None
    except ValueError as exc:  # the same id twice
        audit_change(rt.config, user.name, "documents.upload", index, status=400, ids=list(names)[:50],
                     code="documents.request_invalid", refused=len(items) + len(names))
        items += [{"name": n, "id": i, "change": "refused", "problem": str(exc), "warnings": []}
                  for i, n in names.items()]
    else:
        if changes is None:  # every file refused by its reader: nothing to write, still audited
            audit_change(rt.config, user.name, "documents.upload", index, status=422, ids=[i["id"] for i in items][:50],
                         code="documents.document_invalid", **refused)
        else:
            out, error = await _commit(request, user, "upload", index, changes, warnings, **refused)
            items += _items(out, error, names, warnings)
    return _done(index_url(index), await doc_batch.kept(request, {"action": "upload", "items": items,
                                                                  "commit": out["commit"] if out else None}))


def _upload_refused(request: Request, user: ConsoleUser, index: str, text: str, status: int, *,
                    heading: str = "", back: str = "") -> Response:
    """The page refusing an upload before any file is read (`text`, `status`), audited."""
    audit_change(runtime(request).config, user.name, "documents.upload", index, status=status)
    return message(request, user, heading or _("Upload refused"), text, status=status, active="indexes", back=back)


def _read_files(rt: Runtime, uploads: list[tuple[str, str | None, bytes]], dataset: str, folder: str,
                originals: dict[str, str]) -> tuple[list[dict[str, Any]], list[Document], dict[str, list[str]],
                                                    dict[str, str]]:
    """Each file through the document API's reader: (refused items, documents, warnings by id,
    file name by id); the text of each Markdown or text file read goes into `originals` by id."""
    refused: list[dict[str, Any]] = []
    docs: list[Document] = []
    warnings: dict[str, list[str]] = {}
    names: dict[str, str] = {}
    for filename, media, raw in uploads:
        name = PurePosixPath(filename.replace("\\", "/")).name
        path = folder + name
        doc_id = f"{dataset}:{path}" if dataset else path
        suffix = upload_suffix(media, name)
        if suffix is None:
            refused.append({"name": name, "id": doc_id, "change": "refused", "warnings": [],
                            "problem": _("not a type kbgate reads (one of %(types)s)", types=UPLOAD_ACCEPT)})
            continue
        try:
            doc, notes = file_document(raw, suffix, doc_id, rt.config.documents, dataset=dataset or None, path=path)
        except Refused as exc:
            refused.append({"name": name, "id": doc_id, "change": "refused", "warnings": [],
                            "problem": "; ".join(_clip(m) for _, _, m in exc.items[:3])})
            continue
        except AgentError as exc:
            refused.append({"name": name, "id": doc_id, "change": "refused", "warnings": [],
                            "problem": _clip(exc.message)})
            continue
        docs.append(doc)
        if (text := source_text(raw, suffix)) is not None:
            originals[doc.id] = text
        warnings[doc.id] = notes
        names[doc.id] = name
    return refused, docs, warnings, names


# ---- disable, and what edits and re-indexes share ---------------------------------------


def original_of(rt: Runtime, index: str, doc_id: str) -> str | None:
    """The source text `doc_id` was last written from (`indexes.ledger`), or None (blocking)."""
    try:
        return ledger.original(rt.indexes.folder(index), doc_id)
    except (IndexStoreError, OSError):
        return None


def _stored(rt: Runtime, index: str, doc_id: str, visible: bool | None = None) -> Document | None:
    try:
        return rt.index(index).as_document(doc_id, qa_visible=visible)
    except (DependencyUnavailable, OSError, ValueError):
        return None


async def visibility(request: Request) -> Response:
    """POST /admin/indexes/{index}/visibility (module doc)."""
    user, index = await _allowed(request, "visibility")
    fields = await read_form(request, user, FORM, max_fields=6)
    doc_id, visible = fields.get("id", ""), fields.get("visible") == "1"
    doc = await anyio.to_thread.run_sync(_stored, runtime(request), index, doc_id, visible) if doc_id else None
    if doc is None:
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no document with this id in this index; nothing was changed"))
    action = "enable" if visible else "disable"
    kept = await anyio.to_thread.run_sync(original_of, runtime(request), index, doc_id)
    out, error = await _commit(request, user, action, index, ChangeSet(
        upserts=(doc,), originals=((doc_id, kept),) if kept is not None else ()), {})  # via kept: what wrote it
    back = document_url(index, doc_id) if fields.get("back") == "document" else index_url(index)
    items = [{**i, "change": f"{action}d" if i["change"] == "updated" else i["change"]}
             for i in _items(out, error, {doc_id: doc.path or doc_id}, {})]
    return _done(back, {"action": action, "items": items})


ROUTES = [
    Route("/admin/indexes/{index}/upload", upload, methods=["POST"]),
    Route("/admin/indexes/{index}/visibility", visibility, methods=["POST"]),
]
