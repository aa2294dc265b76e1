"""The index browser: an index's documents and a document's chunks, each page with its JSON twin
(URLs: gateway.console.links).

Rationale: docs/design-notes.md, "gateway/console/browse.py".
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import (
    doc_batch,
    doc_deleted,
    doc_edit,
    doc_facts,
    doc_questions,
    doc_reindex,
    doc_writes,
    index_create,
)
from gateway.console.gaps.store import CHUNK
from gateway.console.i18n import _
from gateway.console.links import document_url, index_url
from gateway.console.render import Answered, gate, json_answer, page, refusal, runtime
from gateway.console.users import ConsoleUser
from gateway.core.errors import DependencyUnavailable
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from indexes.types import ChunkView, DocumentRow

PAGE_SIZE = 50
GLOB = frozenset("*?[")


@dataclass(frozen=True, slots=True)
class Listed:
    """One page of an index's documents. rows: dicts of a DocumentRow plus served, top, lower,
    url, the facts of gateway.console.doc_facts (added_at, updated_at, size, via, refusal, status);
    total: documents in the index; matched: those the filters keep; never: of the matched, never
    served; hidden: disabled (qa_visible off) in the whole index; refused: the writer's refusals of
    ids the index does not hold."""

    rows: list[dict[str, Any]]
    total: int
    matched: int
    never: int
    hidden: int
    datasets: list[str]
    page: int
    pages: int
    refused: list[dict[str, Any]]


def known_indexes(rt: Runtime) -> list[str]:
    """Every index a route names or the index folder holds, sorted."""
    return sorted(set(rt.routed_indexes()) | set(rt.indexes.names()))


def disabled_count(rt: Runtime, index: str) -> int | None:
    """How many documents of `index` are disabled (served to no caller); None when it cannot be
    read. Blocking (one count query): for the overview, run it in a worker thread."""
    try:
        return rt.index(index).hidden_count()
    except (DependencyUnavailable, OSError, ValueError):
        return None


def _path_matches(path: str, wanted: str) -> bool:
    return fnmatch.fnmatchcase(path, wanted) if GLOB & set(wanted) else path.startswith(wanted)


def _listing(rt: Runtime, index: str, path: str, dataset: str, never: bool, page_no: int,
             served: dict[str, int], top: dict[str, int]) -> Listed:
    rows: list[DocumentRow] = rt.index(index).document_rows()
    datasets = sorted({r.dataset for r in rows if r.dataset})
    kept = [r for r in rows if (not path or _path_matches(r.path, path)) and (not dataset or r.dataset == dataset)]
    never_ids = {r.doc_id for r in kept if not served.get(r.doc_id)}
    if never:
        kept = [r for r in kept if r.doc_id in never_ids]
    pages = max(1, -(-len(kept) // PAGE_SIZE))
    page_no = min(max(page_no, 1), pages)
    shown = kept[(page_no - 1) * PAGE_SIZE:page_no * PAGE_SIZE]
    known, refused = doc_facts.facts(rt, index)
    out = [doc_facts.with_facts({**asdict(r), "served": served.get(r.doc_id, 0), "top": top.get(r.doc_id, 0),
                                 "lower": served.get(r.doc_id, 0) - top.get(r.doc_id, 0),
                                 "url": document_url(index, r.doc_id), "editable": doc_writes.editable(r.path)},
                                known.get(r.doc_id)) for r in shown]
    held = {r.doc_id for r in rows}
    return Listed(out, len(rows), len(kept), len(never_ids), sum(not r.qa_visible for r in rows), datasets,
                  page_no, pages, [r for r in refused if r["doc_id"] not in held][:PAGE_SIZE])


def _int(value: str | None, default: int) -> int:
    try:
        return int(value or default)
    except ValueError:
        return default


async def _index_page(request: Request) -> tuple[str, Listed | None, str | None]:
    rt = runtime(request)
    index = str(request.path_params["index"])
    q = request.query_params
    path, dataset = q.get("path", "")[:1024], q.get("dataset", "")[:1024]
    never = q.get("never") == "1"
    days = doc_writes.days(rt)
    note: str | None = None
    try:
        store = request.app.state.gaps.store
        served, top = await store.served(index, days), await store.served(index, days, top=True)
    except DependencyUnavailable:
        served, top = Counter(), Counter()
        note = _("The hit statistics (Redis) are not answering: served counts are left out.")
    try:
        listed = await anyio.to_thread.run_sync(_listing, rt, index, path, dataset, never,
                                                _int(q.get("page"), 1), dict(served), dict(top))
    except (DependencyUnavailable, OSError, ValueError):
        return index, None, _("Index %(name)s cannot be opened.", name=index)
    return index, listed, note


async def indexes_html(request: Request) -> Response:
    """GET /admin/indexes."""
    user = await gate(request, "view", active="indexes")
    return page(request, user, "indexes.html", active="indexes", title=_("Indexes"),
                indexes=await _summaries(runtime(request)))


async def indexes_json(request: Request) -> Response:
    """GET /admin/indexes.json: {"indexes": [{name, documents, chunks, disabled, commit, url}]}."""
    await gate(request, "view", as_json=True)
    return json_answer({"indexes": await _summaries(runtime(request))})


async def _summaries(rt: Runtime) -> list[dict[str, Any]]:
    def one(name: str) -> dict[str, Any]:
        try:
            stats = rt.index(name).stats()
        except (DependencyUnavailable, OSError, ValueError):
            return {"name": name, "documents": None, "chunks": None, "disabled": None, "commit": None,
                    "url": index_url(name)}
        return {"name": name, "documents": stats.documents, "chunks": stats.chunks,
                "disabled": disabled_count(rt, name), "commit": stats.commit, "url": index_url(name)}

    return await anyio.to_thread.run_sync(lambda: [one(n) for n in known_indexes(rt)])


def _unknown(request: Request, user: ConsoleUser, index: str, as_json: bool) -> Response | None:
    if index in known_indexes(runtime(request)):
        return None
    return refusal(request, user, as_json=as_json, status=404, active="indexes",
                   text=_("no index named %(name)s", name=repr(index)))


async def index_html(request: Request) -> Response:
    """GET /admin/indexes/{index}."""
    user = await gate(request, "view", active="indexes")
    index = str(request.path_params["index"])
    if (missing := _unknown(request, user, index, False)) is not None:
        return missing
    index, listed, note = await _index_page(request)
    q = request.query_params
    path, dataset, never = q.get("path", "")[:1024], q.get("dataset", "")[:1024], q.get("never") == "1"
    filters = {"path": path, "dataset": dataset, "never": never}
    links = {}
    if listed is not None:
        base = {"path": path, "dataset": dataset, "never": "1" if never else ""}
        links = {"prev": index_url(index, **base, page=listed.page - 1) if listed.page > 1 else "",
                 "next": index_url(index, **base, page=listed.page + 1) if listed.page < listed.pages else ""}
    rt = runtime(request)
    return doc_writes.clear_report(page(
        request, user, "index.html", active="indexes", title=_("Index %(name)s", name=index), index=index,
        listed=listed, note=note, filters=filters, links=links, days=rt.config.gaps.keep_days,
        report=await doc_batch.whole(request, doc_writes.take_report(request)),
        upload_types=doc_writes.UPLOAD_ACCEPT, max_files=doc_writes.MAX_FILES,
        max_bytes=rt.config.documents.max_body_bytes,
        deleted=await anyio.to_thread.run_sync(doc_deleted.kept, rt, index),
        keep_days=rt.config.admin.keep_deleted_days))


async def index_json(request: Request) -> Response:
    """GET /admin/indexes/{index}.json: {index, total, matched, never, hidden, page, pages,
    datasets, documents: [{doc_id, title, path, dataset, revision, qa_visible, chunks, served,
    top, lower, url, added_at, updated_at (unix s or null), size (bytes or null), via ('console' |
    'api' | 'sync' | 'cli' | '' unknown), refusal ({at, via, kind, reason} or null), kept_source,
    status ('served' | 'disabled' | 'refused')}], refused: [{doc_id, at, via, kind, reason}],
    deleted: [{entry, id, title, path, deleted_at, by, until}] (restorable deletions,
    gateway.console.doc_deleted), note}."""
    user = await gate(request, "view", as_json=True)
    if (missing := _unknown(request, user, str(request.path_params["index"]), True)) is not None:
        return missing
    index, listed, note = await _index_page(request)
    if listed is None:
        return json_answer({"error": note}, 503)
    body = asdict(listed)
    body["documents"] = [{k: v for k, v in r.items() if k != "editable"} for r in body.pop("rows")]
    kept = await anyio.to_thread.run_sync(doc_deleted.kept, runtime(request), index)
    body["deleted"] = [{"entry": k.entry, "id": k.doc_id, "title": k.title, "path": k.path,
                        "deleted_at": k.deleted_at, "by": k.by, "until": k.until} for k in kept]
    return json_answer({"index": index, **body, "note": note})


def _document(rt: Runtime, index: str, doc_id: str) -> tuple[Any, list[ChunkView]] | None:
    idx = rt.index(index)
    doc = idx.get_document(doc_id, include_hidden=True)
    if doc is None:
        return None
    return doc, idx.chunk_views(doc_id)


async def _read_document(request: Request, user: ConsoleUser, as_json: bool) -> tuple[str, Any, list[Any]]:
    """(index, stored document, its chunks); raises Answered with a 404 or 503 refusal."""
    index = str(request.path_params["index"])
    if (missing := _unknown(request, user, index, as_json)) is not None:
        raise Answered(missing)
    doc_id = request.query_params.get("id", "")
    try:
        found = await anyio.to_thread.run_sync(_document, runtime(request), index, doc_id) if doc_id else None
    except (DependencyUnavailable, OSError, ValueError):
        refused = refusal(request, user, as_json=as_json, status=503, active="indexes",
                          text=_("index %(name)s cannot be opened; try again shortly", name=repr(index)))
        raise Answered(refused) from None
    if found is None:
        raise Answered(refusal(request, user, as_json=as_json, status=404, active="indexes",
                               text=_("index %(name)s holds no document with this id", name=repr(index))))
    return index, found[0], found[1]


async def _chunk_hits(request: Request, index: str, doc_id: str) -> dict[int, int] | None:
    """chunk number → times it was the hit served over gaps.keep_days; None when the hit
    statistics (Redis) are not answering."""
    try:
        counts = await request.app.state.gaps.store.served(index, doc_writes.days(runtime(request)), kind=CHUNK)
    except DependencyUnavailable:
        return None
    prefix = doc_id + "#"
    return {int(k[len(prefix):]): n for k, n in counts.items()
            if k.startswith(prefix) and k[len(prefix):].isdigit()}


async def _facts(request: Request, index: str, doc: Any) -> dict[str, Any]:
    known, _refused = await anyio.to_thread.run_sync(doc_facts.facts, runtime(request), index)
    return doc_facts.with_facts({"qa_visible": doc.qa_visible}, known.get(doc.doc_id))


async def document_html(request: Request) -> Response:
    """GET /admin/indexes/{index}/document?id=ID."""
    user = await gate(request, "view", active="indexes")
    index, doc, chunks = await _read_document(request, user, False)
    return doc_writes.clear_report(page(
        request, user, "document.html", active="indexes", title=_("Document %(id)s", id=doc.doc_id), index=index,
        doc=doc, chunks=chunks, back=index_url(index), editable=doc_writes.editable(doc.path),
        edit_url=doc_writes.edit_url(index, doc.doc_id), report=doc_writes.take_report(request),
        facts=await _facts(request, index, doc), hits=await _chunk_hits(request, index, doc.doc_id),
        days=runtime(request).config.gaps.keep_days,
        near=await doc_questions.near(request, user, index, doc.doc_id)))


async def document_json(request: Request) -> Response:
    """GET /admin/indexes/{index}/document.json?id=ID: {index, id, title, path, dataset, revision,
    qa_visible, url, facts (the list's: added_at, updated_at, size, via, refusal, kept_source,
    status), chunks: [{n, section, heading, text, overlap, page, url, hits (null: statistics down)}]}."""
    user = await gate(request, "view", as_json=True)
    index, doc, chunks = await _read_document(request, user, True)
    hits = await _chunk_hits(request, index, doc.doc_id)
    facts = {k: v for k, v in (await _facts(request, index, doc)).items() if k != "qa_visible"}
    return json_answer({"index": index, "id": doc.doc_id, "title": doc.title, "path": doc.path,
                        "dataset": doc.dataset, "revision": doc.revision, "qa_visible": doc.qa_visible,
                        "url": doc.url, "facts": facts,
                        "chunks": [{**asdict(c), "url": document_url(index, doc.doc_id, c.n),
                                    "hits": None if hits is None else hits.get(c.n, 0)} for c in chunks]})


ROUTES = [
    Route("/admin/indexes", indexes_html, methods=["GET"]),
    *index_create.ROUTES,
    json_route("/admin/indexes.json", indexes_json, ["GET"]),
    json_route("/admin/indexes/{index}.json", index_json, ["GET"]),
    Route("/admin/indexes/{index}", index_html, methods=["GET"]),
    json_route("/admin/indexes/{index}/document.json", document_json, ["GET"]),
    Route("/admin/indexes/{index}/document", document_html, methods=["GET"]),
    *doc_writes.ROUTES,
    *doc_edit.ROUTES,
    *doc_reindex.ROUTES,
    *doc_deleted.ROUTES,
]
