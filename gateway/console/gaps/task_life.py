"""A filed task's life: an assignee, open → doing → done (done resolves the group), the document
changed to close it, and every task as CSV.

Rationale: docs/design-notes.md, "gateway/console/gaps/task_life.py".
"""

from __future__ import annotations

import csv
import io
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.gaps.owners import assignees
from gateway.console.gaps.states import TASK_STATES, state_key, status, tasked, version
from gateway.console.gaps.tasks import task_rows
from gateway.console.i18n import _
from gateway.console.render import MAX_FORM_BYTES, Answered, gate, json_answer, read_form, refusal, runtime, see_other
from gateway.console.scores import score_text
from gateway.console.users import can
from gateway.core.bodies import read_limited
from gateway.core.errors import DependencyUnavailable
from gateway.core.validate import ProblemError

FORM = "tasks"
MAX_DOCUMENT_ID = 512
_RISKY = ("=", "+", "-", "@", "\t", "\r")
COLUMNS = ("record", "group", "index", "task", "assignee", "document", "status", "filed_at", "filed_by", "filed",
           "asked", "questions", "near_misses")


def safe_cell(value: Any) -> str:
    """`value` as a CSV cell a spreadsheet shows and never evaluates: one starting with = + - @
    (or a tab or CR) gets a leading ' (OWASP, CSV injection)."""
    text = "" if value is None else str(value)
    return "'" + text if text.startswith(_RISKY) else text


async def _fields(request: Request, by_tool: bool, user: Any) -> dict[str, str]:
    if not by_tool:
        return await read_form(request, user, FORM, max_fields=7)
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, runtime(request).config.server.body_timeout_seconds)
        data = orjson.loads(body)
    except ProblemError:
        raise Answered(json_answer({"error": _("the body is too large or did not arrive in time")}, 413)) from None
    except orjson.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise Answered(json_answer({"error": _("the body must be a JSON object {\"group\", \"task\", \"assignee\", "
                                               "\"document\"}")}, 400))
    return {k: v for k, v in data.items() if isinstance(v, str)}


async def update(request: Request) -> Response:
    """POST /admin/tasks/update: form `group`, `task` (open | doing | done), `assignee` (a user of
    `assignees`, '' nobody), `document` (a document id of the task's index, '' none), `csrf`
    (form label 'tasks'), `base` (the row's `version` the form was drawn from) → 303 to
    /admin/tasks?updated=GROUP#t-GROUP. With a Bearer token the same keys as JSON → {"group",
    "task", "status"}, `base` optional. 400 for a bad value (named), 403 for a role that may not
    file for the index, 404 for a task not seen, 409 for a stale `base` (or a form without one),
    503 when Redis does not answer."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    user = await gate(request, "view_gaps", as_json=by_tool, active="tasks")
    fields = await _fields(request, by_tool, user)
    rt = runtime(request)
    wanted, task = fields.get("group", ""), fields.get("task", "")
    assignee, document = fields.get("assignee", "").strip(), fields.get("document", "").strip()
    if task not in TASK_STATES:
        return refusal(request, user, as_json=by_tool, status=400, active="tasks",
                       text=_("task: must be one of %(states)s", states=", ".join(TASK_STATES)))
    try:
        rows = await task_rows(request, user)
    except DependencyUnavailable:
        return refusal(request, user, as_json=by_tool, status=503, active="tasks",
                       text=_("The gaps record (Redis) is not answering; try again shortly."))
    row = next((r for r in rows if wanted and r["group"] == wanted), None)
    if row is None:
        return refusal(request, user, as_json=by_tool, status=404, active="tasks",
                       text=_("No such task (its group may have expired)."))
    index = row["index"] or ""
    if not can(user, "file_gap", index or None):
        audit_change(rt.config, user.name, "update_task", index or wanted, status=403, group=wanted)
        return refusal(request, user, as_json=by_tool, status=403, active="tasks",
                       text=_("Your role (%(role)s) does not allow changing this task (index %(index)s).",
                              role=user.role_label, index=index or "-"))
    if assignee and assignee not in assignees(rt.config, index):
        return refusal(request, user, as_json=by_tool, status=400, active="tasks",
                       text=_("assignee: %(name)s is not a console user who may work on index %(index)s",
                              name=assignee[:64], index=index or "-"))
    if document and not _document_exists(request, index, document):
        return refusal(request, user, as_json=by_tool, status=400, active="tasks",
                       text=_("document: index %(index)s has no document %(id)s", index=index or "-",
                              id=document[:MAX_DOCUMENT_ID]))
    rec = request.app.state.gaps
    now = rt.clock.now()
    try:
        kept = await rec.states.all()
        key = state_key(wanted, index)
        base = fields.get("base")
        if (base is None and not by_tool) or (base is not None and base != version(kept[key])):
            return refusal(request, user, as_json=by_tool, status=409, active="tasks", text=_(
                "This task changed since this page was opened: open the page again and redo the change. "
                "Nothing was saved."))
        done = tasked(kept[key], task, assignee=assignee, document=document, who=user.name, now=now)
        await rec.states.put(key, done, {r["group"] for r in rows}, now, rt.config.gaps.keep_days)
    except DependencyUnavailable:
        return refusal(request, user, as_json=by_tool, status=503, active="tasks",
                       text=_("The gaps record (Redis) is not answering; try again shortly."))
    except (KeyError, ValueError):
        return refusal(request, user, as_json=by_tool, status=409, active="tasks",
                       text=_("The task changed meanwhile: open the page again."))
    audit_change(rt.config, user.name, "update_task", index or wanted, group=wanted, task=task,
                 assignee=assignee, document=bool(document))
    if by_tool:
        return json_answer({"group": wanted, "task": task, "status": status(done, row["last_asked"] or 0)})
    return see_other(f"/admin/tasks?updated={wanted}#t-{wanted}")


def _document_exists(request: Request, index: str, doc_id: str) -> bool:
    if not index or len(doc_id) > MAX_DOCUMENT_ID:
        return False
    try:
        return runtime(request).index(index).get_document(doc_id, include_hidden=True) is not None
    except Exception:  # an index closed, missing or failing: the id cannot be checked  # noqa: BLE001
        return False


async def export(request: Request) -> Response:
    """GET /admin/tasks.csv: the tasks the user may see (`task_rows`: question texts only for
    admins and the index's owners), UTF-8 with a BOM, as an attachment; every cell through
    `safe_cell`."""
    user = await gate(request, "view_gaps", active="tasks")
    try:
        rows = await task_rows(request, user)
    except DependencyUnavailable:
        return refusal(request, user, as_json=False, status=503, active="tasks",
                       text=_("The gaps record (Redis) is not answering; try again shortly."))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(COLUMNS)
    for r in rows:
        misses = " | ".join(f"{h.get('doc_id', '')} {score_text(h.get('relevance', 0))}"
                            + (f" ({h['why']})" if h.get("why") else "") for h in r["best"] or r["near"])
        values = {**r, "questions": " | ".join(r["questions"]), "near_misses": misses}
        w.writerow([safe_cell(values.get(c)) for c in COLUMNS])
    return Response("\ufeff" + out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={"content-disposition": 'attachment; filename="kbgate-tasks.csv"',
                             "cache-control": "no-store", "x-content-type-options": "nosniff"})


ROUTES = [
    Route("/admin/tasks/update", update, methods=["POST"]),
    Route("/admin/tasks.csv", export, methods=["GET"]),
]
