"""Adding tenants and routes from the console, admins only, through the serialised config edit:
POST /admin/tenants                 name: `[tenants.NAME]` with a generated key, shown once on its page
POST /admin/tenants/{name}/routes   first, second, index: one `[[tenants.NAME.routes]]`
POST /admin/agent/routes            route, index, client?: `[agent.routes.ROUTE]`, listed for the client
Each takes `base` (409 when stale); a route names only an index that exists; refusals name the key.
More: docs/design-notes.md, "gateway/console/tenants_edit.py".
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

import tomlkit
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tomlkit.toml_document import TOMLDocument

from gateway.console.admin_edit import admin_of, refused_edit, source_of
from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.once import OnceStore
from gateway.console.render import json_answer, read_form, refusal, runtime, see_other
from gateway.console.session import presented
from gateway.core.config.edit import array_of_tables, edit_config, tenant_table
from gateway.core.config.fields import ROUTE_NAME, TENANT_NAME
from gateway.core.errors import ConfigError, DependencyUnavailable
from gateway.ops.secrets import add_key

ADD_FORM, AGENT_FORM = "tenant-add", "agent-route"
REPORT_SECONDS = 60  # the bound on the new tenant's keyless instant (enforce once its key lands, at once)


def route_form(name: str) -> str:
    """The CSRF form name of tenant `name`'s add-a-route form."""
    return f"tenant-route:{name}"


def _index_must_exist(request: Request, index: str, key: str) -> None:
    if not request.app.state.document_writes.exists(index):
        raise ConfigError(key, _("names index %(index)s, which does not exist: create it on the Indexes page first",
                                 index=index[:128]))


def create_tenant(path: Path, name: str, *, now: float, base: str | None) -> str:
    """Make `[tenants.NAME]` and give it a generated key; returns the key id. Raises ConfigError
    (ConfigConflict for a stale `base`); the tenant is removed again when its key fails."""
    if not TENANT_NAME.fullmatch(name):
        raise ConfigError(f"tenants.{name[:64]}", _("tenant names are 1-64 of letters, digits, '_', '.', '-'"))

    def mutate(doc: TOMLDocument) -> None:
        if "tenants" not in doc:
            doc["tenants"] = tomlkit.table(is_super_table=True)
        if name in doc["tenants"]:
            raise ConfigError(f"tenants.{name}", _("exists already"))
        t = tomlkit.table()
        t["path"] = f"/volcengine/{name}"
        t["verify"] = "report"  # keyless for the instant before its key, which no route serves yet
        t["report_until"] = dt.datetime.fromtimestamp(math.ceil(now + REPORT_SECONDS), dt.UTC)
        doc["tenants"][name] = t

    edit_config(path, mutate, base=base)
    try:
        return add_key(path, name, now=now, value_source="the generated key", verify="enforce").key_id
    except BaseException:
        edit_config(path, lambda doc: doc["tenants"].remove(name))
        raise


def add_route(path: Path, name: str, first: str, second: str, index: str, *, base: str | None) -> None:
    """Append `{first, second, index}` to `[[tenants.NAME.routes]]`. Raises ConfigError."""
    def mutate(doc: TOMLDocument) -> None:
        routes = array_of_tables(tenant_table(doc, name), "routes")
        if any((str(r.get("first_level_id")), str(r.get("second_level_id"))) == (first, second) for r in routes):
            raise ConfigError(f"tenants.{name}.routes", _("routes %(first)s/%(second)s already", first=first,
                                                          second=second))
        r = tomlkit.table()
        r["first_level_id"], r["second_level_id"], r["index"] = first, second, index
        routes.append(r)

    edit_config(path, mutate, base=base)


def add_agent_route(path: Path, route: str, index: str, client: str, *, base: str | None) -> None:
    """Add `[agent.routes.ROUTE] index` and, when `client`, the route to that client's routes."""
    if not ROUTE_NAME.fullmatch(route):
        raise ConfigError(f"agent.routes.{route[:64]}", _("route names are 1-64 of letters, digits, '_', '.', '-'"))

    def mutate(doc: TOMLDocument) -> None:
        agent = doc.get("agent")
        if agent is None:
            raise ConfigError("agent", _("is not configured: agent clients need [agent] ref_key_env first"))
        if "routes" not in agent:
            agent["routes"] = tomlkit.table(is_super_table=True)
        if route in agent["routes"]:
            raise ConfigError(f"agent.routes.{route}", _("exists already"))
        t = tomlkit.table()
        t["index"] = index
        agent["routes"][route] = t
        if client:
            clients = agent.get("clients")
            if clients is None or client not in clients:
                raise ConfigError(f"agent.clients.{client[:64]}", _("does not exist"))
            clients[client]["routes"].append(route)

    edit_config(path, mutate, base=base)


async def add_tenant_post(request: Request) -> Response:
    """POST /admin/tenants (module doc)."""
    user, tool = await admin_of(request, "manage_tenants", "tenants.create", "", active="tenants")
    fields = await read_form(request, user, ADD_FORM, max_fields=4)
    rt = runtime(request)
    name = fields.get("name", "").strip()
    try:
        key_id = await run_in_threadpool(lambda: create_tenant(source_of(rt.config), name, now=rt.clock.now(),
                                                               base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("Tenant %(name)s not added", name=name[:64]),
                            active="tenants", audited="tenants.create", target=name[:64])
    audit_change(rt.config, user.name, "tenants.create", name, key_id=key_id)
    if tool:
        return json_answer({"tenant": name, "key_id": key_id, "path": f"/volcengine/{name}"})
    once: OnceStore = request.app.state.once
    try:
        note = await once.put(presented(request) or "", {"tenant": name, "key_id": key_id, "generated": True})
    except DependencyUnavailable:
        return refusal(request, user, as_json=False, status=503, active="tenants", text=_(
            "Tenant %(name)s was added, but the console's notes (Redis) are not answering, so its key cannot be "
            "shown: add another key on its page later.", name=name))
    return see_other(f"/admin/tenants/{quote(name)}?shown={quote(note)}#rotation")


async def _route_common(request: Request, form: str, audited: str, target: str,
                        active: str) -> tuple[Any, bool, dict[str, str]]:
    user, tool = await admin_of(request, "manage_tenants", audited, target, active=active)
    fields = await read_form(request, user, form, max_fields=8)
    return user, tool, fields


async def add_route_post(request: Request) -> Response:
    """POST /admin/tenants/{name}/routes (module doc)."""
    name = request.path_params["name"]
    user, tool, fields = await _route_common(request, route_form(name), "tenants.add_route", name, "tenants")
    rt = runtime(request)
    first, second, index = (fields.get(k, "").strip() for k in ("first", "second", "index"))
    try:
        if not first or not second:
            raise ConfigError(f"tenants.{name}.routes", _("needs a FirstLevelId and a SecondLevelId"))
        _index_must_exist(request, index, f"tenants.{name}.routes.index")
        await run_in_threadpool(lambda: add_route(source_of(rt.config), name, first, second, index,
                                                  base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("Route not added"), active="tenants",
                            audited="tenants.add_route", target=name, index=index[:128])
    audit_change(rt.config, user.name, "tenants.add_route", name, first_level_id=first, second_level_id=second,
                 index=index)
    if tool:
        return json_answer({"tenant": name, "first": first, "second": second, "index": index})
    return see_other(f"/admin/tenants/{quote(name)}#paste")


async def add_agent_route_post(request: Request) -> Response:
    """POST /admin/agent/routes (module doc)."""
    user, tool, fields = await _route_common(request, AGENT_FORM, "agent.add_route", "", "tenants")
    rt = runtime(request)
    route, index, client = (fields.get(k, "").strip() for k in ("route", "index", "client"))
    try:
        _index_must_exist(request, index, f"agent.routes.{route[:64]}.index")
        await run_in_threadpool(lambda: add_agent_route(source_of(rt.config), route, index, client,
                                                        base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("Agent route not added"), active="tenants",
                            audited="agent.add_route", target=route[:64], index=index[:128])
    audit_change(rt.config, user.name, "agent.add_route", route, index=index, client=client)
    if tool:
        return json_answer({"route": route, "index": index, "client": client or None})
    return see_other("/admin/tenants#agent")


ROUTES = [Route("/admin/tenants", add_tenant_post, methods=["POST"]),
          Route("/admin/tenants/{name}/routes", add_route_post, methods=["POST"]),
          Route("/admin/agent/routes", add_agent_route_post, methods=["POST"])]
