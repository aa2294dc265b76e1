"""`/admin/tenants`: the Volcengine tenants, for whoever wires the 联网问答Agent console.

Rationale: docs/design-notes.md, "gateway/console/tenants_page.py".
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.i18n import _
from gateway.console.on_disk import file_base, file_config
from gateway.console.once import OnceStore, valid_id
from gateway.console.render import gate, json_answer, message, page, runtime
from gateway.console.session import presented
from gateway.console.tenants_data import tenant_view
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.methods import json_route
from gateway.ops.probe import ADVICE

DEFAULT_QUERY = "连通性测试"  # what the test asks unless the admin types a question


async def _views(request: Request, names: list[str] | None = None) -> list[dict[str, Any]]:
    rt = runtime(request)
    on_disk = await run_in_threadpool(file_config, rt.config)
    wanted = names if names is not None else sorted(set(on_disk.tenants) | set(rt.config.tenants))
    out = []
    for name in wanted:
        view = await tenant_view(rt.config, on_disk, request, request.app.state.key_usage, name, rt.clock.now())
        if view is not None:
            out.append(view)
    return out


async def tenants_html(request: Request) -> Response:
    """GET /admin/tenants."""
    user = await gate(request, "view", active="tenants")
    rt = runtime(request)
    base = await run_in_threadpool(file_base, rt.config)  # before the file is read
    on_disk = await run_in_threadpool(file_config, rt.config)
    return page(request, user, "tenants.html", active="tenants", title=_("Tenants"), tenants=await _views(request),
                base=base or "", indexes=rt.indexes.names(), agent_clients=sorted(on_disk.agent.clients),
                agent_routes=[{"name": n, "index": r.index} for n, r in sorted(on_disk.agent.routes.items())])


async def tenants_json(request: Request) -> Response:
    """GET /admin/tenants.json[?tenant=NAME]: {"tenants": [...]} (one when named; 404 when unknown)."""
    await gate(request, "view", as_json=True)
    name = request.query_params.get("tenant")
    base = await run_in_threadpool(file_base, runtime(request).config)
    views = await _views(request, [name] if name is not None else None)
    if name is not None and not views:
        return json_answer({"error": "no such tenant"}, 404)
    return json_answer({"tenants": views, "base": base})


def _secret_of(config: Config, tenant: str, key_id: str) -> str | None:
    """The value of key `key_id` of `tenant` in the config file now (blocking), or None."""
    t = file_config(config, read_secrets=True).tenants.get(tenant)
    key = next((k for k in t.secrets if k.id == key_id), None) if t else None
    try:
        return key.value.reveal() if key is not None else None
    except RuntimeError:  # the file could not be loaded with its secrets: an UnreadSecret
        return None


async def _notes(request: Request, name: str) -> tuple[dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """(the new key to show once, the test answer, an error) named by ?shown= and ?test=."""
    once: OnceStore = request.app.state.once
    login = presented(request) or ""
    shown_id, test_id = request.query_params.get("shown", ""), request.query_params.get("test", "")
    shown = test = None
    try:
        if valid_id(shown_id):
            note = await once.get(login, shown_id, take=True)
            if note is not None and note.get("tenant") == name:
                shown = dict(note)
                if note.get("generated"):
                    shown["secret"] = await run_in_threadpool(_secret_of, runtime(request).config, name,
                                                              str(note.get("key_id")))
            else:
                shown = {"gone": True}
        elif shown_id:
            shown = {"gone": True}
        if valid_id(test_id):
            test = await once.get(login, test_id, take=False)
            if test is not None and test.get("tenant") != name:
                test = None
    except DependencyUnavailable:
        return None, None, _("The console's notes (Redis) are not answering: the new key or the test's answer "
                             "cannot be shown.")
    return shown, test, None


async def tenant_html(request: Request) -> Response:
    """GET /admin/tenants/{name}."""
    user = await gate(request, "view", active="tenants")
    name = request.path_params["name"]
    base = await run_in_threadpool(file_base, runtime(request).config)  # before the page reads the file
    views = await _views(request, [name])
    if not views:
        return message(request, user, _("No such tenant"), _("No tenant of that name is configured."), status=404,
                       back="/admin/tenants", active="tenants")
    shown, test, error = await _notes(request, name)
    rt = runtime(request)
    return page(request, user, "tenant.html", active="tenants", title=_("Tenant %(name)s", name=name), t=views[0],
                shown=shown, test=test, error=error, advice={k: _(v) for k, v in ADVICE.items()},
                default_query=DEFAULT_QUERY, public_url=rt.config.server.public_url, base=base or "",
                indexes=rt.indexes.names())


ROUTES = [
    Route("/admin/tenants", tenants_html, methods=["GET"]),
    json_route("/admin/tenants.json", tenants_json, ["GET"]),
    Route("/admin/tenants/{name}", tenant_html, methods=["GET"]),
]
