"""`/admin/users`: who may use the console, with which role (admins only).

Rationale: docs/design-notes.md, "gateway/console/users_page.py".
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.credentials import new_credential
from gateway.console.i18n import _
from gateway.console.on_disk import conflict_text, file_base, file_config
from gateway.console.once import OnceStore, valid_id
from gateway.console.render import gate, json_answer, page, read_form, refusal, runtime, see_other
from gateway.console.session import presented
from gateway.console.users import can
from gateway.console.users_cli import add_user
from gateway.core.config.edit import ConfigConflict
from gateway.core.config.owners import CONSOLE_ROLES
from gateway.core.errors import ConfigError, DependencyUnavailable
from gateway.core.methods import json_route

FORM = "users-add"


async def _users(request: Request) -> dict[str, Any]:
    config = runtime(request).config
    base = await run_in_threadpool(file_base, config)  # before the file is read: a change between is stale
    admin = (await run_in_threadpool(file_config, config)).admin  # a user just added shows
    return {"users": [{"name": u.name, "role": u.role, "indexes": list(u.indexes)} for u in admin.users],
            "admin_token": admin.token_sha256 is not None, "base": base}


async def users_html(request: Request) -> Response:
    """GET /admin/users."""
    user = await gate(request, "manage_users", active="users")
    added, error = None, None
    note_id = request.query_params.get("added", "")
    if note_id:
        once: OnceStore = request.app.state.once
        try:
            added = await once.get(presented(request) or "", note_id, take=True) if valid_id(note_id) else None
        except DependencyUnavailable:
            error = _("The console's notes (Redis) are not answering: the new credential cannot be shown.")
        added = added or {"gone": True}
    changed, removed = request.query_params.get("changed", "")[:64], request.query_params.get("removed", "")[:64]
    return page(request, user, "users.html", active="users", title=_("Users"), added=added, error=error,
                changed=changed, removed=removed,
                roles=CONSOLE_ROLES, indexes=runtime(request).indexes.names(), **(await _users(request)))


async def add_user_post(request: Request) -> Response:
    """POST /admin/users (module doc)."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    user = await gate(request, "view", as_json=by_tool, active="users")
    rt = runtime(request)
    fields = await read_form(request, user, FORM, max_fields=8 + len(rt.indexes.names()))
    name, role = fields.get("name", "").strip(), fields.get("role", "")
    indexes = sorted(k[6:] for k, v in fields.items() if k.startswith("index.") and v)
    indexes = indexes if role == "owner" else []
    if not can(user, "manage_users"):
        audit_change(rt.config, user.name, "users.add", name, status=403, role=role)
        return refusal(request, user, as_json=by_tool, status=403, active="users",
                       text=_("Your role (%(role)s) does not allow adding users: only an admin does. Nothing was "
                              "changed.", role=user.role_label))
    if role not in CONSOLE_ROLES:
        return refusal(request, user, as_json=by_tool, status=400, active="users", text=_("Choose a role."))
    credential = new_credential()
    try:
        if rt.config.source is None:
            raise ConfigError("<file>", "this server was not started from a config file: use kbgate users add")
        source, base = rt.config.source, fields.get("base") or None
        config = await run_in_threadpool(lambda: add_user(source, name, role, indexes, credential, base=base))
    except ConfigConflict as err:
        audit_change(rt.config, user.name, "users.add", name, status=409, role=role, indexes=indexes)
        return refusal(request, user, as_json=by_tool, status=409, active="users",
                       text=_("User %(name)s not added: %(problem)s", name=name, problem=conflict_text(err)))
    except ConfigError as err:
        audit_change(rt.config, user.name, "users.add", name, status=400, role=role, indexes=indexes)
        return refusal(request, user, as_json=by_tool, status=400, active="users",
                       text=_("User not added (%(key)s: %(problem)s). Nothing was changed.", key=err.key,
                              problem=err.message))
    audit_change(config, user.name, "users.add", name, role=role, indexes=indexes)
    added = {"name": name, "role": role, "indexes": indexes, "credential": credential}
    if by_tool:
        return json_answer(added)
    once: OnceStore = request.app.state.once
    try:
        note = await once.put(presented(request) or "", added)
    except DependencyUnavailable:
        return refusal(request, user, as_json=False, status=503, active="users",
                       text=_("User %(name)s was added, but the console's notes (Redis) are not answering, so the "
                              "credential cannot be shown: remove the user and add them again later.", name=name))
    return see_other("/admin/users?added=" + quote(note))


async def users_json(request: Request) -> Response:
    """GET /admin/users.json."""
    await gate(request, "manage_users", as_json=True)
    return json_answer(await _users(request))


ROUTES = [Route("/admin/users", users_html, methods=["GET"]), Route("/admin/users", add_user_post, methods=["POST"]),
          json_route("/admin/users.json", users_json, ["GET"])]
