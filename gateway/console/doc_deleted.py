"""Deleting a document from the browser, confirmed first and restorable for a while, and
restoring it (gateway.documents.deleted keeps it; the write goes through the document API's
own writes, as every browser change does: gateway.console.doc_writes).

Rationale: docs/design-notes.md, "gateway/console/doc_deleted.py".
"""

from __future__ import annotations

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import doc_writes as dw
from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.links import document_url, index_url
from gateway.console.render import page, read_form, refusal, runtime
from gateway.console.users import ConsoleUser
from gateway.core.runtime import Runtime
from gateway.documents import deleted
from indexes.types import ChangeSet, Document


def kept(rt: Runtime, index: str) -> list[deleted.Kept]:
    """The restorable deletions of `index`, newest first (blocking; expired ones purged). [] when
    the folder cannot be read."""
    try:
        return deleted.listing(rt.config.indexes_dir, index, now=rt.clock.now(), days=rt.config.admin.keep_deleted_days)
    except OSError:
        return []


async def _confirm(request: Request, user: ConsoleUser, index: str, doc_id: str) -> Response:
    """The confirmation page of deleting `doc_id` (404 when the index holds no such document)."""
    rt = runtime(request)
    doc = await anyio.to_thread.run_sync(dw._stored, rt, index, doc_id) if doc_id else None
    if doc is None:
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no document with this id in this index; nothing was changed"))
    days = rt.config.admin.keep_deleted_days
    return page(request, user, "doc_delete.html", active="indexes", title=_("Delete %(id)s?", id=doc_id),
                index=index, doc=doc, days=days, until=rt.clock.now() + days * deleted.DAY,
                back=document_url(index, doc_id))


async def confirm_page(request: Request) -> Response:
    """GET /admin/indexes/{index}/delete?id=ID (module doc)."""
    allowed = await dw._allowed(request, "delete")
    user, index = allowed
    return await _confirm(request, user, index, request.query_params.get("id", ""))


def _keep(rt: Runtime, index: str, doc: Document, who: str) -> str | None:
    days = rt.config.admin.keep_deleted_days
    if days == 0:
        return None
    return deleted.keep(rt.config.indexes_dir, index, doc, by=who, now=rt.clock.now())


async def delete(request: Request) -> Response:
    """POST /admin/indexes/{index}/delete (module doc)."""
    allowed = await dw._allowed(request, "delete")
    user, index = allowed
    fields = await read_form(request, user, dw.FORM, max_fields=6)
    doc_id = fields.get("id", "")
    if not doc_id:
        return refusal(request, user, as_json=False, status=400, active="indexes",
                       text=_("name the document to delete"))
    if fields.get("confirm") != "1":
        return await _confirm(request, user, index, doc_id)
    rt = runtime(request)
    doc = await anyio.to_thread.run_sync(dw._stored, rt, index, doc_id)
    if doc is None:
        return dw._done(index_url(index), {"action": "delete", "items": [
            {"name": doc_id, "id": doc_id, "change": "refused", "warnings": [],
             "problem": "no document with this id in this index (deleted already?)"}]})
    try:
        entry = await anyio.to_thread.run_sync(_keep, rt, index, doc, user.name)
    except OSError as exc:
        audit_change(rt.config, user.name, "documents.delete", index, status=503, ids=[doc_id])
        return refusal(request, user, as_json=False, status=503, active="indexes",
                       text=_("The document could not be kept for restoring (%(problem)s), so it was not deleted.",
                              problem=exc.strerror or "not writable"))
    out, error = await dw._commit(request, user, "delete", index, ChangeSet(deletes=(doc_id,), via="console"), {})
    if out is None and entry is not None:
        await anyio.to_thread.run_sync(deleted.drop, rt.config.indexes_dir, index, entry)
    items = dw._items(out, error, {doc_id: doc.path or doc_id}, {})
    return dw._done(index_url(index), {"action": "delete", "items": items})


async def restore(request: Request) -> Response:
    """POST /admin/indexes/{index}/restore (module doc)."""
    allowed = await dw._allowed(request, "restore")
    user, index = allowed
    fields = await read_form(request, user, dw.FORM, max_fields=4)
    rt = runtime(request)
    days = rt.config.admin.keep_deleted_days
    found = await anyio.to_thread.run_sync(lambda: deleted.find(rt.config.indexes_dir, index, now=rt.clock.now(),
                                                                days=days, entry=fields.get("entry", "")))
    if found is None:
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no deleted document to restore by that name: it was restored already, or it was "
                              "deleted more than %(days)s day(s) ago (admin.keep_deleted_days) and purged", days=days))
    k, doc = found
    if await anyio.to_thread.run_sync(dw._stored, rt, index, k.doc_id) is not None:
        audit_change(rt.config, user.name, "documents.restore", index, status=409, ids=[k.doc_id])
        return refusal(request, user, as_json=False, status=409, active="indexes",
                       text=_("index %(index)s holds a document %(id)s again (added after the delete): nothing "
                              "was restored. Delete that one first to restore the deleted one, or keep it.",
                              index=index, id=k.doc_id))
    out, error = await dw._commit(request, user, "restore", index, ChangeSet(upserts=(doc,), via="console"), {})
    if out is not None:
        await anyio.to_thread.run_sync(deleted.drop, rt.config.indexes_dir, index, k.entry)
    items = [{**i, "change": "restored" if i["change"] == "added" else i["change"]}
             for i in dw._items(out, error, {k.doc_id: k.path or k.doc_id}, {})]
    return dw._done(document_url(index, k.doc_id) if out is not None else index_url(index),
                    {"action": "restore", "items": items})


ROUTES = [
    Route("/admin/indexes/{index}/delete", confirm_page, methods=["GET"]),
    Route("/admin/indexes/{index}/delete", delete, methods=["POST"]),
    Route("/admin/indexes/{index}/restore", restore, methods=["POST"]),
]
