"""`/admin/gaps` and `/admin/documents`: the knowledge owner's view of what went unanswered and
which documents were served (gateway.console).

Rationale: docs/design-notes.md, "gateway/console/gaps/views.py".
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.agent.feedback.sqlite import StoreUnavailable
from gateway.agent.tools.clients import LazyClients
from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.gaps.filing import file_group
from gateway.console.gaps.groups import MIN_GROUP_PREFIX, Group, group
from gateway.console.gaps.owners import visible_groups
from gateway.console.gaps.record import GapRecorder
from gateway.console.gaps.states import GroupState, filed, state_key, state_of, status
from gateway.console.gaps.store import days_back
from gateway.console.i18n import _
from gateway.console.render import MAX_FORM_BYTES, Answered, gate, json_answer, page, read_form, refusal, see_other
from gateway.console.users import ConsoleUser, can
from gateway.core.bodies import read_limited
from gateway.core.errors import DependencyUnavailable, ToolError
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

FORM = "gaps"

MAX_DOCUMENT_ROWS = 1000


def _state(request: Request) -> tuple[Runtime, GapRecorder]:
    return request.app.state.runtime, request.app.state.gaps


async def _groups(request: Request) -> list[Group]:
    rt, rec = _state(request)
    cfg = rt.config
    questions = await rec.store.questions(cfg.gaps, rt.clock.now(), with_examples=cfg.gaps.keep_text)
    return group(questions, cfg.gaps.max_examples)


def _filed(request: Request) -> dict[str, Any] | None:
    """The note of a filing just done, from the redirect's query (?filed=ID&count=N&deduped=1)."""
    q = request.query_params
    if not q.get("filed"):
        return None
    return {"record": q["filed"][:64], "count": q.get("count", "")[:12], "deduped": q.get("deduped") == "1"}


async def _shown(request: Request, user: ConsoleUser) -> tuple[list[Group], dict[str, str], dict[str, GroupState]]:
    """The groups `user` may see, open ones first (then resolved, then ignored), the index of
    each, and their states for that index (group id → state). Raises DependencyUnavailable."""
    rt, rec = _state(request)
    groups, about = visible_groups(user, await _groups(request), rt.config)
    kept = await rec.states.all()
    states = {g.id: s for g in groups if (s := state_of(kept, g.id, about[g.id])) is not None}
    rank = {"open": 0, "reopened": 0, "filed": 0, "resolved": 1, "ignored": 2}
    groups.sort(key=lambda g: rank[status(states.get(g.id), g.last)])
    return groups, about, states


def _group_json(g: Group, index: str, state: GroupState | None) -> dict[str, Any]:
    return {**g.public(), "index": index or None, "status": status(state, g.last),
            "record": state.record if state and state.record else None, "filed": state.filed if state else 0,
            "try": f"/admin/try?gap={g.id}"}


async def gaps_html(request: Request) -> Response:
    """GET /admin/gaps."""
    user = await gate(request, "view_gaps", active="gaps")
    rt, rec = _state(request)
    error = None
    try:
        groups, about, states = await _shown(request, user)
    except DependencyUnavailable:
        groups, about, states, error = [], {}, {}, _("The gaps record (Redis) is not answering; try again shortly.")
    scoped = sorted(user.indexes) if user.role == "owner" else None
    return page(request, user, "gaps.html", active="gaps", title=_("Gaps"), groups=groups, shared=rec.store.shared,
                threshold=rt.config.gaps.threshold, filed=_filed(request), error=error, scoped=scoped,
                keep_text=rt.config.gaps.keep_text, text_days=rt.config.gaps.text_seconds // 86400 or 1,
                group_index=about, states=states, gap_status=status, marked=request.query_params.get("marked", "")[:16])


async def gaps_json(request: Request) -> Response:
    """GET /admin/gaps.json: {"groups": [Group.public() + index, status, record, filed, try], "shared":
    bool, "threshold": float}."""
    user = await gate(request, "view_gaps", as_json=True)
    rt, rec = _state(request)
    try:
        groups, about, states = await _shown(request, user)
    except DependencyUnavailable:
        return json_answer({"error": "gaps record unavailable"}, 503)
    return json_answer({"groups": [_group_json(g, about[g.id], states.get(g.id)) for g in groups],
                        "shared": rec.store.shared, "threshold": rt.config.gaps.threshold})


async def _wanted(request: Request, user: ConsoleUser, by_tool: bool) -> str | None:
    rt, _rec = _state(request)
    if by_tool:
        try:
            body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
        except ProblemError:
            raise Answered(json_answer({"error": "the body is too large or did not arrive in time"}, 413)) from None
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise Answered(json_answer({"error": "the body must be a JSON object {\"group\": id}"}, 400)) from None
        wanted = data.get("group") if isinstance(data, dict) else None
        return wanted if isinstance(wanted, str) else None
    fields = await read_form(request, user, FORM, max_fields=4)
    return fields.get("group")


async def file_task(request: Request) -> Response:
    """POST /admin/gaps/file (module doc)."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    user = await gate(request, "view_gaps", as_json=by_tool, active="gaps")
    rt, _rec = _state(request)
    wanted = await _wanted(request, user, by_tool)
    if not wanted:
        return refusal(request, user, as_json=by_tool, status=400, text=_("name the group to file"), active="gaps")
    if len(wanted) < MIN_GROUP_PREFIX:  # too short to name one group: say so, not "no such group"
        return refusal(request, user, as_json=by_tool, status=400, active="gaps",
                       text=_("give the group's id or at least its first %(n)s characters", n=MIN_GROUP_PREFIX))
    try:
        groups = await _groups(request)
    except DependencyUnavailable:
        return refusal(request, user, as_json=by_tool, status=503, active="gaps",
                       text=_("the gaps record (Redis) is not answering; try again shortly"))
    groups, about = visible_groups(user, groups, rt.config)
    found = next((g for g in groups if g.id == wanted or g.id.startswith(wanted)), None)
    if found is not None and not can(user, "file_gap", about[found.id] or None):
        audit_change(rt.config, user.name, "file_gap", about[found.id] or found.id, status=403, group=found.id)
        return refusal(request, user, as_json=by_tool, status=403, active="gaps",
                       text=_("Your role (%(role)s) does not allow filing a task for this gap (index %(index)s); "
                              "ask an admin or the index's owner.", role=user.role_label,
                              index=about[found.id] or _("unknown")))
    if found is None:
        return refusal(request, user, as_json=by_tool, status=404, text=_("no such gap group (it may have expired)"),
                       active="gaps")
    clients: LazyClients = request.app.state.gap_clients
    try:
        result = await file_group(clients.get(), found, show_queries=rt.config.admin.show_queries,
                                  labels=rt.config.access.labels)
    except StoreUnavailable as exc:
        audit_change(rt.config, user.name, "file_gap", about[found.id] or found.id, status=503, group=found.id)
        return refusal(request, user, as_json=by_tool, status=503, active="gaps",
                       text=_("the task was not filed: the feedback store %(path)s cannot be opened or written "
                              "(%(problem)s); its folder %(folder)s must be writable by kbgate (access.sqlite_path)",
                              path=exc.path, problem=exc.problem, folder=exc.path.parent))
    except ToolError as exc:
        audit_change(rt.config, user.name, "file_gap", about[found.id] or found.id, status=503, group=found.id)
        return refusal(request, user, as_json=by_tool, status=503, active="gaps",
                       text=_("the tracker did not take the task (%(code)s)", code=exc.code))
    audit_change(rt.config, user.name, "file_gap", about[found.id] or found.id, group=found.id,
                 record=result.get("recordId"), deduped=bool(result.get("deduped")))
    try:
        rec = _state(request)[1].states
        now = rt.clock.now()
        index = about[found.id]
        done = filed(state_of(await rec.all(), found.id, index), index=index,
                     record=str(result.get("recordId") or ""), who=user.name, now=now)
        await rec.put(state_key(found.id, index), done, {g.id for g in groups}, now, rt.config.gaps.keep_days)
    except DependencyUnavailable:
        pass  # the task is filed; its mark on the page waits for Redis (the tracker deduplicates a refiling)
    if by_tool:
        return json_answer({"group": found.id, **result})
    note = {"filed": str(result.get("recordId")), "count": str(result.get("count", ""))}
    if result.get("deduped"):
        note["deduped"] = "1"
    return see_other("/admin/gaps?" + urlencode(note))


async def _documents(request: Request) -> tuple[list[tuple[str, list[tuple[str, str, int]], int | None]], bool]:
    rt, rec = _state(request)
    days = days_back(rt.clock.now(), rt.config.gaps.keep_days)
    out: list[tuple[str, list[tuple[str, str, int]], int | None]] = []
    for name in rt.routed_indexes():
        served = await rec.store.served(name, days)
        try:
            idx = rt.index(name)
            docs = sorted(idx.revisions())
        except (DependencyUnavailable, OSError, ValueError):
            out.append((name, [], None))
            continue
        ranked = sorted(docs, key=lambda d: (-served.get(d, 0), d))[:MAX_DOCUMENT_ROWS]
        rows = []
        for d in ranked:
            doc = idx.get_document(d, include_hidden=True)
            rows.append((d, doc.title if doc is not None else "", served.get(d, 0)))
        out.append((name, rows, len(docs)))
    return out, rec.store.shared


async def documents_html(request: Request) -> Response:
    """GET /admin/documents: the index browser took its place (gateway.console.browse)."""
    return see_other("/admin/indexes")


async def documents_json(request: Request) -> Response:
    """GET /admin/documents.json: {"indexes": {name: {"documents": n, "served": {doc: n}, "never": [doc]}}}."""
    await gate(request, "view", as_json=True)
    try:
        indexes, shared = await _documents(request)
    except DependencyUnavailable:
        return json_answer({"error": "hit statistics unavailable"}, 503)
    return json_answer({"indexes": {name: {"documents": total, "served": {d: n for d, _, n in rows if n},
                                           "never": [d for d, _, n in rows if n == 0]}
                                    for name, rows, total in indexes}, "shared": shared})


ROUTES = [
    Route("/admin/gaps", gaps_html, methods=["GET"]),
    json_route("/admin/gaps.json", gaps_json, ["GET"]),
    Route("/admin/gaps/file", file_task, methods=["POST"]),
    Route("/admin/documents", documents_html, methods=["GET"]),
    json_route("/admin/documents.json", documents_json, ["GET"]),
]
