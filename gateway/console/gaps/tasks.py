"""Marking a gap group resolved or ignored, and `/admin/tasks`: what was filed.

Rationale: docs/design-notes.md, "gateway/console/gaps/tasks.py".
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.gaps.groups import Group, group
from gateway.console.gaps.owners import assignees, group_indexes, route_indexes, visible_groups
from gateway.console.gaps.record import GapRecorder
from gateway.console.gaps.states import (
    MARKS,
    TASK_STATES,
    GroupState,
    group_of,
    marked,
    state_key,
    state_of,
    status,
    version,
)
from gateway.console.i18n import _
from gateway.console.render import MAX_FORM_BYTES, Answered, gate, json_answer, page, read_form, refusal, see_other
from gateway.console.users import ConsoleUser, can
from gateway.core.bodies import read_limited
from gateway.core.errors import DependencyUnavailable
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

FORM = "gaps"


def _state(request: Request) -> tuple[Runtime, GapRecorder]:
    return request.app.state.runtime, request.app.state.gaps


async def _visible(request: Request, user: ConsoleUser, *, with_examples: bool = False,
                   ) -> tuple[list[Group], dict[str, str]]:
    rt, rec = _state(request)
    questions = await rec.store.questions(rt.config.gaps, rt.clock.now(), with_examples=with_examples)
    return visible_groups(user, group(questions, rt.config.gaps.max_examples), rt.config)


async def _fields(request: Request, user: ConsoleUser, by_tool: bool) -> dict[str, str]:
    if not by_tool:
        return await read_form(request, user, FORM, max_fields=4)
    rt, _rec = _state(request)
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
        data = orjson.loads(body)
    except ProblemError:
        raise Answered(json_answer({"error": "the body is too large or did not arrive in time"}, 413)) from None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise Answered(json_answer({"error": "the body must be a JSON object {\"group\": id, \"mark\": ...}"}, 400))
    return {k: v for k, v in data.items() if isinstance(v, str)}


async def mark(request: Request) -> Response:
    """POST /admin/gaps/mark (module doc)."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    user = await gate(request, "view_gaps", as_json=by_tool, active="gaps")
    fields = await _fields(request, user, by_tool)
    wanted, how = fields.get("group", ""), fields.get("mark", "")
    if how not in MARKS:
        return refusal(request, user, as_json=by_tool, status=400, active="gaps",
                       text=_("mark: must be one of %(marks)s", marks=", ".join(MARKS)))
    rt, rec = _state(request)
    try:
        groups, about = await _visible(request, user)
        found = next((g for g in groups if wanted and g.id == wanted), None)
        if found is None:
            return refusal(request, user, as_json=by_tool, status=404, active="gaps",
                           text=_("no such gap group (it may have expired)"))
        index = about[found.id]
        names = group_indexes(found, route_indexes(rt.config))
        targets = [n for n in names if can(user, "file_gap", n)] or \
            ([""] if not names and can(user, "file_gap", None) else [])
        if not targets:
            audit_change(rt.config, user.name, "mark_gap", index or found.id, status=403, group=found.id, mark=how)
            return refusal(request, user, as_json=by_tool, status=403, active="gaps",
                           text=_("Your role (%(role)s) does not allow marking this gap (index %(index)s); ask an "
                                  "admin or the index's owner.", role=user.role_label, index=index or _("unknown")))
        now = rt.clock.now()
        states = await rec.states.all()
        done: dict[str, GroupState] = {}
        for target in targets:  # `index` is one of them (visible_groups picks one the user may file for)
            done[target] = marked(state_of(states, found.id, target), how, index=target, who=user.name, now=now)
            await rec.states.put(state_key(found.id, target), done[target], {g.id for g in groups}, now,
                                 rt.config.gaps.keep_days)
    except DependencyUnavailable:
        return refusal(request, user, as_json=by_tool, status=503, active="gaps",
                       text=_("the gaps record (Redis) is not answering; try again shortly"))
    audit_change(rt.config, user.name, "mark_gap", ",".join(targets) or found.id, group=found.id, mark=how)
    if by_tool:
        return json_answer({"group": found.id, "status": status(done.get(index), found.last),
                            "indexes": [t for t in targets if t]})
    return see_other(f"/admin/gaps?marked={how}#g-{found.id}")


async def task_rows(request: Request, user: ConsoleUser) -> list[dict[str, Any]]:
    """The filed groups `user` may see, newest filing first: group, index, record, filed,
    filed_at, filed_by, status, asked, last_asked, task, assignee, document, version (`version`:
    the `base` an update may carry), questions (the
    group's texts `user` may read), best (its near misses). Raises DependencyUnavailable."""
    rt, rec = _state(request)
    groups, _about = await _visible(request, user, with_examples=rt.config.gaps.keep_text)
    by_id = {g.id: g for g in groups}
    states: dict[str, GroupState] = await rec.states.all()
    rows = []
    for key, s in states.items():
        gid = group_of(key)
        if not s.record or not can(user, "view_gaps", s.index or None) or \
                (user.role == "owner" and not s.index):
            continue
        g = by_id.get(gid)
        rows.append({"group": gid, "index": s.index or None, "record": s.record, "filed": s.filed,
                     "filed_at": s.filed_at, "filed_by": s.filed_by,
                     "status": status(s, g.last) if g is not None else "expired",
                     "asked": g.count if g is not None else None, "last_asked": g.last if g is not None else None,
                     "task": s.task or "open", "assignee": s.assignee, "document": s.document, "version": version(s),
                     "questions": list(g.examples) if g is not None else [], "best": list(g.best) if g else [],
                     "near": list(g.near) if g else []})
    return sorted(rows, key=lambda r: -r["filed_at"])


async def tasks_html(request: Request) -> Response:
    """GET /admin/tasks."""
    user = await gate(request, "view_gaps", active="tasks")
    error = None
    try:
        rows = await task_rows(request, user)
    except DependencyUnavailable:
        rows, error = [], _("The gaps record (Redis) is not answering; try again shortly.")
    rt, _rec = _state(request)
    people = {r["index"] or "": assignees(rt.config, r["index"] or "") for r in rows}
    return page(request, user, "tasks.html", active="tasks", title=_("Tasks"), rows=rows, error=error,
                assignees=people, task_states=TASK_STATES, updated=request.query_params.get("updated", "")[:64])


async def tasks_json(request: Request) -> Response:
    """GET /admin/tasks.json: {"tasks": [row]} (row: group, index, record, filed, filed_at,
    filed_by, status, asked, last_asked)."""
    user = await gate(request, "view_gaps", as_json=True)
    try:
        return json_answer({"tasks": await task_rows(request, user)})
    except DependencyUnavailable:
        return json_answer({"error": "gaps record unavailable"}, 503)


ROUTES = [
    Route("/admin/gaps/mark", mark, methods=["POST"]),
    Route("/admin/tasks", tasks_html, methods=["GET"]),
    json_route("/admin/tasks.json", tasks_json, ["GET"]),
]
