"""Removing routes from the console, admins only, confirmed first, through the serialised config edit:
POST /admin/tenants/{name}/routes/remove   first, second: one `[[tenants.NAME.routes]]` entry
POST /admin/agent/routes/remove            route: `[agent.routes.ROUTE]`, and its name in every client
Each takes `base` (409 when stale); a route that is not there is refused naming its key.
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
from gateway.console.render import json_answer, read_form, see_other
from gateway.console.render import runtime as runtime_of
from gateway.core.config.edit import array_of_tables, edit_config, tenant_table
from gateway.core.errors import ConfigError

AGENT_REMOVE_FORM = "agent-route-remove"


def remove_form(name: str) -> str:
    """The CSRF form name of tenant `name`'s remove-a-route forms."""
    return f"tenant-route-remove:{name}"


def remove_route(path: Path, name: str, first: str, second: str, *, base: str | None) -> str:
    """Remove `first`/`second` from `[[tenants.NAME.routes]]`; the index it named. Raises ConfigError."""
    removed: list[str] = []

    def mutate(doc: TOMLDocument) -> None:
        routes = array_of_tables(tenant_table(doc, name), "routes")
        for i, r in enumerate(routes):
            if (str(r.get("first_level_id")), str(r.get("second_level_id"))) == (first, second):
                removed.append(str(r.get("index", "")))
                del routes[i]
                return
        raise ConfigError(f"tenants.{name}.routes", _("has no route %(first)s/%(second)s", first=first,
                                                      second=second))

    edit_config(path, mutate, base=base)
    return removed[0]


def remove_agent_route(path: Path, route: str, *, base: str | None) -> str:
    """Remove `[agent.routes.ROUTE]` and its name from every client's routes; the index it named.
    Raises ConfigError."""
    removed: list[str] = []

    def mutate(doc: TOMLDocument) -> None:
        routes = (doc.get("agent") or {}).get("routes") or {}
        if route not in routes:
            raise ConfigError(f"agent.routes.{route[:64]}", _("does not exist"))
        removed.append(str(routes[route].get("index", "")))
        del routes[route]
        for client in ((doc.get("agent") or {}).get("clients") or {}).values():
            names = client.get("routes")
            if names is not None and route in names:
                names.remove(route)

    edit_config(path, mutate, base=base)
    return removed[0]


async def remove_route_post(request: Request) -> Response:
    """POST /admin/tenants/{name}/routes/remove (module doc)."""
    name = request.path_params["name"]
    user, tool = await admin_of(request, "manage_tenants", "tenants.remove_route", name, active="tenants")
    fields = await read_form(request, user, remove_form(name), max_fields=6)
    first, second = fields.get("first", ""), fields.get("second", "")
    back = f"/admin/tenants/{quote(name)}#routes"
    if not confirmed(fields, tool):
        return confirm_page(request, user, title=_("Remove route %(first)s/%(second)s?", first=first, second=second),
                            what=_("Tenant %(tenant)s stops answering FirstLevelId %(first)s / SecondLevelId "
                                   "%(second)s: the agent's callbacks for this path get Ret 40402 (route_unknown) "
                                   "until a route is added again.", tenant=name, first=first, second=second),
                            action=f"/admin/tenants/{quote(name)}/routes/remove", form=remove_form(name),
                            fields={"first": first, "second": second, "base": fields.get("base", "")},
                            yes=_("Remove the route"), no=_("Keep it"), back=back, active="tenants")
    rt = runtime_of(request)
    try:
        index = await run_in_threadpool(lambda: remove_route(source_of(rt.config), name, first, second,
                                                             base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("Route not removed"), active="tenants",
                            audited="tenants.remove_route", target=name)
    audit_change(rt.config, user.name, "tenants.remove_route", name, first_level_id=first, second_level_id=second,
                 index=index)
    if tool:
        return json_answer({"tenant": name, "first": first, "second": second, "removed": True})
    return see_other(back)


async def remove_agent_route_post(request: Request) -> Response:
    """POST /admin/agent/routes/remove (module doc)."""
    user, tool = await admin_of(request, "manage_tenants", "agent.remove_route", "", active="tenants")
    fields = await read_form(request, user, AGENT_REMOVE_FORM, max_fields=6)
    route = fields.get("route", "")
    if not confirmed(fields, tool):
        return confirm_page(request, user, title=_("Remove agent route %(route)s?", route=route),
                            what=_("Agent clients stop reaching route %(route)s (its name is taken out of every "
                                   "client's routes) until it is added again.", route=route),
                            action="/admin/agent/routes/remove", form=AGENT_REMOVE_FORM,
                            fields={"route": route, "base": fields.get("base", "")},
                            yes=_("Remove the route"), no=_("Keep it"), back="/admin/tenants#agent", active="tenants")
    rt = runtime_of(request)
    try:
        index = await run_in_threadpool(lambda: remove_agent_route(source_of(rt.config), route,
                                                                   base=fields.get("base") or None))
    except ConfigError as err:
        return refused_edit(request, user, tool, err, _("Agent route not removed"), active="tenants",
                            audited="agent.remove_route", target=route[:64])
    audit_change(rt.config, user.name, "agent.remove_route", route, index=index)
    if tool:
        return json_answer({"route": route, "removed": True})
    return see_other("/admin/tenants#agent")


ROUTES = [Route("/admin/tenants/{name}/routes/remove", remove_route_post, methods=["POST"]),
          Route("/admin/agent/routes/remove", remove_agent_route_post, methods=["POST"])]
