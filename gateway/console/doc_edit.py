"""Editing a Markdown or text document in the browser, on the text it was written from (kept by
`indexes.ledger`), saved through the document API's reader and writer (gateway.console.doc_writes).
A document written before its text was kept opens rebuilt from its chunks, and the page says so.

GET  /admin/indexes/{index}/edit?id=    the text in a form;  POST …/edit  id, text, base, replace, csrf
`base` is the SHA-256 of the text the form was drawn from: a save on a stale form answers 409 with
the typed text kept on the page, as does a browser's form without one (a tool may leave it out).
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import PurePosixPath
from typing import Any

import anyio.to_thread
import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import doc_writes as dw
from gateway.console.auth import bearer
from gateway.console.i18n import _
from gateway.console.links import document_url
from gateway.console.render import page, read_form, refusal, runtime
from gateway.core.errors import AgentError
from gateway.documents.reading import file_document
from gateway.documents.wire import Refused
from indexes.types import ChangeSet, Document


def as_text(doc: Document) -> str:
    """A stored Markdown or text document rebuilt from its chunks, for one written before its
    text was kept: Markdown gets its title and url as front matter and each section under a '##'
    heading (the heading levels are not stored); text is the stored text."""
    if PurePosixPath(doc.path).suffix.lower() == ".txt":
        return "\n\n".join(s.text if not s.heading else f"{s.heading}\n{s.text}" for s in doc.sections)
    head = [f"title: {orjson.dumps(doc.title).decode()}"] + ([f"url: {orjson.dumps(doc.url).decode()}"]
                                                              if doc.url else [])
    body = [f"## {s.heading}\n\n{s.text}" if s.heading else s.text for s in doc.sections]
    return "---\n" + "\n".join(head) + "\n---\n\n" + "\n\n".join(body) + "\n"


def digest(text: str) -> str:
    """The version an edit form carries (`base`): the SHA-256 hex of the text it shows."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


async def _shown(rt: Any, index: str, doc_id: str, doc: Document) -> tuple[str, bool]:
    """(the text the edit form shows for `doc`, whether it is rebuilt from the chunks)."""
    kept = await anyio.to_thread.run_sync(dw.original_of, rt, index, doc_id)
    return (as_text(doc), True) if kept is None else (kept, False)


async def edit_form(request: Request) -> Response:
    """GET /admin/indexes/{index}/edit?id=ID."""
    allowed = await dw._allowed(request, "edit")
    user, index = allowed
    rt = runtime(request)
    doc_id = request.query_params.get("id", "")
    doc = await anyio.to_thread.run_sync(dw._stored, rt, index, doc_id) if doc_id else None
    if doc is None or not dw.editable(doc.path):
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no Markdown or text document with this id in this index"))
    text, rebuilt = await _shown(rt, index, doc_id, doc)
    return page(request, user, "doc_edit.html", active="indexes", title=_("Edit %(name)s", name=doc_id), index=index,
                doc=doc, text=text, base=digest(text), rebuilt=rebuilt, stale=False,
                back=document_url(index, doc_id))


async def edit(request: Request) -> Response:
    """POST /admin/indexes/{index}/edit (module doc)."""
    allowed = await dw._allowed(request, "edit")
    user, index = allowed
    rt = runtime(request)
    by_tool = bearer(request.headers.get("authorization")) is not None
    fields = await read_form(request, user, dw.FORM, max_bytes=rt.config.documents.max_body_bytes, max_fields=6)
    doc_id = fields.get("id", "")
    old = await anyio.to_thread.run_sync(dw._stored, rt, index, doc_id) if doc_id else None
    if old is None or not dw.editable(old.path):
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no Markdown or text document with this id in this index; nothing was changed"))
    suffix = PurePosixPath(old.path).suffix.lower()
    text = fields.get("text", "").replace("\r\n", "\n")
    base = fields.get("base")
    current = digest((await _shown(rt, index, doc_id, old))[0])
    if (base is None and not by_tool) or (base is not None and base != current):
        return page(request, user, "doc_edit.html", active="indexes", status=409,
                    title=_("Edit %(name)s", name=doc_id), index=index, doc=old, text=text, stale=True,
                    back=document_url(index, doc_id), again=dw.edit_url(index, doc_id))
    try:
        doc, notes = await anyio.to_thread.run_sync(lambda: file_document(
            text.encode("utf-8"), suffix, doc_id, rt.config.documents, dataset=old.dataset or None, path=old.path))
    except AgentError as exc:
        problem = "; ".join(m for _, _, m in exc.items[:3]) if isinstance(exc, Refused) else exc.message
        return dw._done(document_url(index, doc_id), {"action": "edit", "items": [
            {"name": old.path, "id": doc_id, "change": "refused", "problem": dw._clip(problem), "warnings": []}]})
    if not old.qa_visible:  # an edit keeps a disabled document disabled
        doc = dataclasses.replace(doc, qa_visible=False)
    changes = ChangeSet(upserts=(doc,), replace=fields.get("replace") == "1", via="console",
                        originals=((doc_id, text),))
    out, error = await dw._commit(request, user, "edit", index, changes, {doc_id: notes})
    return dw._done(document_url(index, doc_id), {"action": "edit", "items": dw._items(
        out, error, {doc_id: old.path}, {doc_id: notes})})


ROUTES = [
    Route("/admin/indexes/{index}/edit", edit_form, methods=["GET"]),
    Route("/admin/indexes/{index}/edit", edit, methods=["POST"]),
]
