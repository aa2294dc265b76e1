"""Re-indexing from the browser: one document, or every document of an index (confirmed first),
read again from its kept source text (`indexes.ledger`) through the document API's reader, else
rebuilt from its chunks, and written again through the index's one writer (chunked and analysed
anew: `ChangeSet.rewrite`), in commits of BATCH documents. The report says what changed.

Rationale: docs/design-notes.md, "gateway/console/doc_reindex.py".
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import quote

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import doc_writes as dw
from gateway.console.confirm import confirm_page
from gateway.console.i18n import _
from gateway.console.links import document_url, index_url
from gateway.console.render import read_form, refusal, runtime
from gateway.core.errors import AgentError, DependencyUnavailable
from gateway.core.runtime import Runtime
from gateway.documents.reading import file_document
from indexes import ledger
from indexes.errors import IndexStoreError
from indexes.types import ChangeSet, Document

BATCH = 100  # documents a commit


def fresh(rt: Runtime, index: str, doc_id: str) -> Document | None:
    """`doc_id` as it is written again (blocking): re-read from its kept source text when there is
    one (its visibility and source as stored), else as stored; None when the index lacks it."""
    stored = dw._stored(rt, index, doc_id)
    if stored is None:
        return None
    try:
        kept = ledger.original(rt.indexes.folder(index), doc_id)
    except IndexStoreError:
        kept = None
    if kept is None or not dw.editable(stored.path):
        return stored
    try:
        doc, _notes = file_document(kept.encode("utf-8"), PurePosixPath(stored.path).suffix.lower(), doc_id,
                                    rt.config.documents, dataset=stored.dataset or None, path=stored.path)
    except AgentError:
        return stored  # the reader refuses it now: written again as stored
    return dataclasses.replace(doc, qa_visible=stored.qa_visible, source=stored.source)


def _chunk_counts(rt: Runtime, index: str) -> dict[str, int]:
    try:
        return {r.doc_id: r.chunks for r in rt.index(index).document_rows()}
    except (DependencyUnavailable, OSError, ValueError):
        return {}


def _read_all(rt: Runtime, index: str, ids: list[str]) -> tuple[list[Document], dict[str, str]]:
    docs = [d for i in ids if (d := fresh(rt, index, i)) is not None]
    folder = rt.indexes.folder(index)
    originals = {d.id: text for d in docs if (text := ledger.original(folder, d.id)) is not None}
    return docs, originals


async def reindex(request: Request) -> Response:
    """POST /admin/indexes/{index}/reindex (module doc)."""
    allowed = await dw._allowed(request, "reindex")
    user, index = allowed
    rt = runtime(request)
    fields = await read_form(request, user, dw.FORM, max_fields=6)
    every = fields.get("all") == "1"
    before = await anyio.to_thread.run_sync(_chunk_counts, rt, index)
    if every and fields.get("confirm") != "1":
        return confirm_page(request, user, title=_("Re-index every document of %(index)s?", index=index),
                            what=_("All %(n)s document(s) of index %(index)s are read again and written anew, in "
                                   "commits of %(batch)s; callers keep being answered meanwhile.", n=len(before),
                                   index=index, batch=BATCH),
                            action=f"/admin/indexes/{quote(index, safe='')}/reindex", form=dw.FORM, fields={"all": "1"},
                            yes=_("Re-index all"), no=_("Cancel"), back=index_url(index), active="indexes")
    doc_id = fields.get("id", "")
    ids = sorted(before) if every else ([doc_id] if doc_id in before else [])
    if not ids:
        return refusal(request, user, as_json=False, status=404, active="indexes",
                       text=_("no document with this id in this index; nothing was changed"))
    items: list[dict[str, Any]] = []
    for start in range(0, len(ids), BATCH):
        docs, originals = await anyio.to_thread.run_sync(_read_all, rt, index, ids[start:start + BATCH])
        if not docs:
            continue
        changes = ChangeSet(upserts=tuple(docs), replace=True, originals=tuple(originals.items()), rewrite=True)
        out, error = await dw._commit(request, user, "reindex", index, changes, {})
        items += dw._items(out, error, {d.id: d.path or d.id for d in docs}, {})
        if out is None:
            break
    after = await anyio.to_thread.run_sync(_chunk_counts, rt, index)
    for i in items:
        if i["change"] == "updated":  # written again (ChangeSet.rewrite)
            i["change"], i["chunks"] = "reindexed", [before.get(i["id"], 0), after.get(i["id"], 0)]
    shown = [i for i in items if not every or i["change"] == "refused" or i["chunks"][0] != i["chunks"][1]]
    done = sum(i["change"] == "reindexed" for i in items)
    summary = {"documents": done, "refused": sum(i["change"] == "refused" for i in items),
               "left": len(ids) - len(items),
               "chunks_before": sum(before.get(i["id"], 0) for i in items if i["change"] == "reindexed"),
               "chunks_after": sum(after.get(i["id"], 0) for i in items if i["change"] == "reindexed"),
               "changed": sum(1 for i in items if i.get("chunks") and i["chunks"][0] != i["chunks"][1])}
    back = index_url(index) if every else document_url(index, doc_id)
    return dw._done(back, {"action": "reindex", "items": shown, "reindexed": summary})


ROUTES = [Route("/admin/indexes/{index}/reindex", reindex, methods=["POST"])]
