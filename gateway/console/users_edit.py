"""Changing and removing console users from the Users page, admins only, through the serialised
config edit, CSRF-checked, audited (`base`: 409 when the page is stale):
POST /admin/users/role     name, role, index.NAME=1 per index an owner owns (any index that exists)
POST /admin/users/remove   name; a browser confirms first (confirm=1), a tool (Bearer) does not
An admin never changes or removes themselves here. Refusals name the key `admin.users.NAME...`.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tomlkit.toml_document import TOMLDocument

from gateway.console.admin_edit import admin_of, refused_edit, source_of
from gateway.console.changes import audit_change
from gateway.console.confirm import confirm_page, confirmed
from gateway.console.i18n import _
from gateway.console.render import json_answer, read_form, refusal, runtime, see_other
from gateway.console.users import ConsoleUser
from gateway.console.users_cli import missing_indexes, remove_user
from gateway.core.config import Config
from gateway.core.config.edit import edit_config
from gateway.core.config.owners import CONSOLE_ROLES
from gateway.core.errors import ConfigError

ROLE_FORM, REMOVE_FORM = "users-role", "users-remove"


def set_role(path: Path, name: str, role: str, indexes: list[str], *, base: str | None = None) -> Config:
    """Give `[admin.users.NAME]` `role` and (an owner's) `indexes`, its credential kept. Raises
    ConfigError naming the key (no such user, an index that does not exist, an owner of none),
    ConfigConflict for a file changed since `base`."""
    if indexes and (missing := missing_indexes(path, indexes)):
        raise ConfigError(f"admin.users.{name}.indexes", _(
            "names %(names)s, which no index is: an owner owns only indexes that exist",
            names=", ".join(repr(m[:64]) for m in missing)))

    def mutate(doc: TOMLDocument) -> None:
        admin = doc.get("admin")
        users = admin.get("users") if admin is not None else None
        if users is None or name not in users:
            raise ConfigError(f"admin.users.{name}", _("does not exist"))
        entry = users[name]
        entry["role"] = role
        if indexes:
            entry["indexes"] = indexes
        elif "indexes" in entry:
            del entry["indexes"]

    return edit_config(path, mutate, base=base)


def _self_refusal(request: Request, user: ConsoleUser, tool: bool, name: str) -> Response | None:
    if user.name == name:
        return refusal(request, user, as_json=tool, status=409, active="users",
                       text=_("You cannot change or remove yourself: another admin does. Nothing was changed."))
    return None


async def role_post(request: Request) -> Response:
    """POST /admin/users/role (module doc)."""
    user, tool = await admin_of(request, "manage_users", "users.role", "", active="users")
    rt = runtime(request)
    fields = await read_form(request, user, ROLE_FORM, max_fields=8 + len(rt.indexes.names()))
    name, role = fields.get("name", "").strip(), fields.get("role", "")
    indexes = sorted(k[6:] for k, v in fields.items() if k.startswith("index.") and v) if role == "owner" else []
    if (mine := _self_refusal(request, user, tool, name)) is not None:
        return mine
    if role not in CONSOLE_ROLES:
        return refusal(request, user, as_json=tool, status=400, active="users",
                       text=_("admin.users.%(name)s.role: choose viewer, owner or admin. Nothing was changed.",
                              name=name))
    try:
        config = await run_in_threadpool(lambda: set_role(source_of(rt.config), name, role, indexes,
                                                          base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("User %(name)s not changed", name=name), active="users",
                            audited="users.role", target=name, role=role, indexes=indexes)
    audit_change(config, user.name, "users.role", name, role=role, indexes=indexes)
    if tool:
        return json_answer({"name": name, "role": role, "indexes": indexes})
    return see_other("/admin/users?changed=" + quote(name) + "#users")


async def remove_post(request: Request) -> Response:
    """POST /admin/users/remove (module doc)."""
    user, tool = await admin_of(request, "manage_users", "users.remove", "", active="users")
    fields = await read_form(request, user, REMOVE_FORM, max_fields=6)
    rt = runtime(request)
    name, base = fields.get("name", "").strip(), fields.get("base", "")
    if (mine := _self_refusal(request, user, tool, name)) is not None:
        return mine
    if not confirmed(fields, tool):
        return confirm_page(request, user, title=_("Remove user %(name)s?", name=name), what=_(
            "%(name)s can no longer log in once the server reloads its config (within a second); their credential "
            "stops working. Adding them again gives them a new credential.", name=name),
            action="/admin/users/remove", form=REMOVE_FORM, fields={"name": name, "base": base},
            yes=_("Yes, remove %(name)s", name=name), no=_("No, keep %(name)s", name=name), back="/admin/users",
            active="users")
    try:
        config = await run_in_threadpool(lambda: remove_user(source_of(rt.config), name, base=base or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("User %(name)s not removed", name=name), active="users",
                            audited="users.remove", target=name)
    audit_change(config, user.name, "users.remove", name)
    if tool:
        return json_answer({"name": name, "removed": True})
    return see_other("/admin/users?removed=" + quote(name) + "#users")


ROUTES = [Route("/admin/users/role", role_post, methods=["POST"]),
          Route("/admin/users/remove", remove_post, methods=["POST"])]
