"""The Tenants page's changes, admins only, each a CSRF-checked POST answered with a redirect
(POST-redirect-GET), or JSON for a tool sending `Authorization: Bearer` (same form fields):

Rationale: docs/design-notes.md, "gateway/console/tenants_actions.py".
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.i18n import N_, _
from gateway.console.on_disk import conflict_text, file_base, file_config
from gateway.console.once import OnceStore
from gateway.console.render import Answered, gate, json_answer, page, read_form, refusal, runtime, see_other
from gateway.console.session import presented
from gateway.console.tenants_data import key_state, test_url
from gateway.console.tenants_page import DEFAULT_QUERY
from gateway.console.users import ConsoleUser, can
from gateway.core.config import Config, Tenant
from gateway.core.config.edit import ConfigConflict
from gateway.core.errors import RET_TABLE, ConfigError, DependencyUnavailable
from gateway.ops.probe import probe
from gateway.ops.retirement import retirement_problem
from gateway.ops.secrets import add_key, retire_key

TEST_LIMIT = 3  # results the connectivity test asks for
TEST_TIMEOUT = 10.0  # seconds the test waits for the callback's answer
LOAD_WAIT = 3.0  # seconds the test waits for this worker to load a key just added
GRACE = {"now": 0, "3600": 3600, "86400": 86400}
GRACE_WORDS = {"now": N_("now"), "3600": N_("in 1 hour"), "86400": N_("in 24 hours")}


async def _admin(request: Request, name: str, action: str) -> tuple[ConsoleUser, bool, Tenant]:
    """(the admin, whether a tool asks, the tenant) or the answer: login, a 403 naming the
    role (audited as denied), a 404 for an unknown tenant."""
    by_tool = bearer(request.headers.get("authorization")) is not None
    user = await gate(request, "view", as_json=by_tool, active="tenants")
    rt = runtime(request)
    if not can(user, "manage_tenants"):
        audit_change(rt.config, user.name, action, name, status=403)
        raise Answered(refusal(request, user, as_json=by_tool, status=403, active="tenants",
                               text=_("Your role (%(role)s) does not allow changing or testing tenants: only an admin "
                                      "does. Nothing was changed.", role=user.role_label)))
    tenant = rt.config.tenants.get(name)
    if tenant is None:
        raise Answered(refusal(request, user, as_json=by_tool, status=404, active="tenants", text=_("No such tenant.")))
    return user, by_tool, tenant


def _back(name: str, **params: str) -> str:
    query = "&".join(f"{k}={quote(v)}" for k, v in params.items())
    return f"/admin/tenants/{quote(name)}" + (f"?{query}" if query else "")


async def _signing_key(request: Request, name: str, wanted: str) -> tuple[str, str] | str:
    """(key id, secret) this worker verifies with: `wanted`, or the newest live key; waits up to
    LOAD_WAIT for a key just added to be loaded. Else what is wrong, in words."""
    rt = runtime(request)
    for _attempt in range(int(LOAD_WAIT * 10) + 1):
        now = rt.clock.now()
        tenant = rt.config.tenants.get(name)  # a reload may have removed it meanwhile
        live = [k for k in tenant.secrets if k.live(now)] if tenant is not None else []
        key = next((k for k in live if k.id == wanted), None) if wanted else (live[-1] if live else None)
        if key is not None:
            return key.id, key.value.reveal()
        await asyncio.sleep(0.1)
    return _("key %(key)s is not live in this server", key=wanted) if wanted else \
        _("the tenant has no live key: add one first")


def _answer(outcome: Any, key_id: str, route: dict[str, str], query: str, show_queries: bool) -> dict[str, Any]:
    env = outcome.envelope or {}
    reason = next((r.reason for r in RET_TABLE if r.ret == env.get("Ret")), None)
    results = [{"Id": str(i.get("Id", "")), "Title": str(i.get("Title", "")), "Url": str(i.get("Url", "")),
                "Summary": str(i.get("Summary", ""))[:160]} for i in (env.get("Result") or []) if isinstance(i, dict)]
    return {"url": outcome.url, "status": outcome.status, "ret": env.get("Ret"), "msg": env.get("Msg"),
            "reason": reason, "results": results, "latency_ms": round(outcome.elapsed_ms, 1), "ok": outcome.ok,
            "problem": outcome.problem, "key_id": key_id, "route": route, "route_state": outcome.route_state,
            **({"query": query} if show_queries else {})}


async def test_tenant(request: Request) -> Response:
    """POST /admin/tenants/{name}/test (module doc)."""
    name = request.path_params["name"]
    user, by_tool, tenant = await _admin(request, name, "tenants.test")
    fields = await read_form(request, user, f"tenant-test:{name}")
    rt = runtime(request)
    number = fields.get("route", "0")
    query = fields.get("query", "").strip() or DEFAULT_QUERY
    if not number.isdigit() or int(number) >= len(tenant.routes):
        return refusal(request, user, as_json=by_tool, status=400, active="tenants",
                       text=_("Choose one of the routes."))
    if len(query) > rt.config.search.max_query_chars:
        return refusal(request, user, as_json=by_tool, status=400, active="tenants",
                       text=_("The question is longer than search.max_query_chars (%(n)s).",
                              n=rt.config.search.max_query_chars))
    r = tenant.routes[int(number)]
    key = await _signing_key(request, name, fields.get("key", ""))
    if isinstance(key, str):
        return refusal(request, user, as_json=by_tool, status=409, active="tenants",
                       text=_("Cannot test: %(problem)s.", problem=key))
    url = test_url(rt.config, request, tenant)
    outcome = await run_in_threadpool(probe, url, secret=key[1], first=r.first_level_id, second=r.second_level_id,
                                      query=query, limit=TEST_LIMIT, timeout=TEST_TIMEOUT, tenant=name)
    result = {"tenant": name, **_answer(outcome, key[0], {"first": r.first_level_id, "second": r.second_level_id},
                                        query, rt.config.admin.show_queries)}
    audit_change(rt.config, user.name, "tenants.test", name, status=outcome.status or 502, key_id=key[0],
                 first_level_id=r.first_level_id, second_level_id=r.second_level_id, ret=result["ret"])
    if by_tool:
        return json_answer(result)
    try:
        note = await _once(request).put(presented(request) or "", result)
    except DependencyUnavailable:
        return refusal(request, user, as_json=False, status=503, active="tenants",
                       text=_("The test got Ret %(ret)s, but the console's notes (Redis) are not answering to "
                              "show it; see Deliveries.", ret=result["ret"]))
    return see_other(_back(name, test=note) + "#test")


def _once(request: Request) -> OnceStore:
    once: OnceStore = request.app.state.once
    return once


def _source(config: Config) -> Any:
    if config.source is None:
        raise ConfigError("<file>", "this server was not started from a config file: change keys with kbgate secrets")
    return config.source


async def add_tenant_key(request: Request) -> Response:
    """POST /admin/tenants/{name}/keys (module doc)."""
    name = request.path_params["name"]
    user, by_tool, _tenant = await _admin(request, name, "tenants.add_key")
    fields = await read_form(request, user, f"tenant-add-key:{name}")
    rt = runtime(request)
    key_id, value = fields.get("key_id", "").strip() or None, fields.get("value", "").strip() or None
    base = fields.get("base") or None
    try:
        added = await run_in_threadpool(lambda: add_key(_source(rt.config), name, now=rt.clock.now(), key_id=key_id,
                                                        value=value, value_source="the key field", base=base))
    except ConfigConflict as err:
        audit_change(rt.config, user.name, "tenants.add_key", name, status=409, key_id=key_id)
        return refusal(request, user, as_json=by_tool, status=409, active="tenants",
                       text=_("Key not added: %(problem)s", problem=conflict_text(err)))
    except ConfigError as err:
        audit_change(rt.config, user.name, "tenants.add_key", name, status=400, key_id=key_id)
        return refusal(request, user, as_json=by_tool, status=400, active="tenants",
                       text=_("Key not added (%(key)s: %(problem)s). Nothing was changed.", key=err.key,
                              problem=err.message))
    audit_change(rt.config, user.name, "tenants.add_key", name, key_id=added.key_id, generated=value is None)
    if by_tool:
        secret = added.created_file.read_text("utf-8").strip() if value is None and added.created_file else None
        return json_answer({"tenant": name, "key_id": added.key_id, "secret": secret})
    note = await _once(request).put(presented(request) or "", {"tenant": name, "key_id": added.key_id,
                                                               "generated": value is None})
    return see_other(_back(name, shown=note) + "#rotation")


async def retire_tenant_key(request: Request) -> Response:
    """POST /admin/tenants/{name}/keys/{key_id}/retire (module doc)."""
    name, key_id = request.path_params["name"], request.path_params["key_id"]
    user, by_tool, _tenant = await _admin(request, name, "tenants.retire_key")
    fields = await read_form(request, user, f"tenant-retire:{name}:{key_id}")
    rt = runtime(request)
    when = fields.get("when", "")
    grace = GRACE.get(when)
    if grace is None:
        return refusal(request, user, as_json=by_tool, status=400, active="tenants",
                       text=_("Choose when to retire the key: now, in 1 hour or in 24 hours. Nothing was changed."))
    base = fields.get("base") or None
    if not by_tool and fields.get("confirm") != "1":
        return await _confirm_retire(request, user, name, key_id, when, base)
    now = rt.clock.now()
    try:
        await run_in_threadpool(lambda: retire_key(_source(rt.config), name, key_id, now=now, at=now + grace,
                                                   base=base))
    except ConfigConflict as err:
        audit_change(rt.config, user.name, "tenants.retire_key", name, status=409, key_id=key_id)
        return refusal(request, user, as_json=by_tool, status=409, active="tenants",
                       text=_("Key %(key)s not retired: %(problem)s", key=key_id, problem=conflict_text(err)))
    except ConfigError as err:
        audit_change(rt.config, user.name, "tenants.retire_key", name, status=409, key_id=key_id)
        return refusal(request, user, as_json=by_tool, status=409, active="tenants",
                       text=_("Key %(key)s not retired (%(where)s: %(problem)s). Nothing was changed.", key=key_id,
                              where=err.key, problem=err.message))
    audit_change(rt.config, user.name, "tenants.retire_key", name, key_id=key_id, grace_seconds=grace)
    if by_tool:
        return json_answer({"tenant": name, "key_id": key_id, "not_after": now + grace})
    return see_other(_back(name) + "#keys")


async def _confirm_retire(request: Request, user: ConsoleUser, name: str, key_id: str, when: str,
                          base: str | None) -> Response:
    """The confirmation page of a retirement: the key, when it stops, its last use and the
    tenant's other keys; its one form posts the same choice with confirm=1 (no JavaScript)."""
    rt = runtime(request)
    on_disk = await run_in_threadpool(file_config, rt.config)
    tenant = on_disk.tenants.get(name)
    keys = tenant.secrets if tenant is not None else ()
    if key_id not in {k.id for k in keys}:
        return refusal(request, user, as_json=False, status=404, active="tenants",
                       text=_("Tenant %(name)s has no key %(key)s. Nothing was changed.", name=name, key=key_id))
    now = rt.clock.now()
    try:
        used = await request.app.state.key_usage.read(name, [k.id for k in keys])
    except (RedisError, OSError, TimeoutError, DependencyUnavailable):  # shown when known, never a stop
        used = None
    others = [{"id": k.id, "state": key_state(k, now), "not_after": k.not_after,
               "count": used[k.id].count if used and k.id in used else None} for k in keys if k.id != key_id]
    mine = used.get(key_id) if used else None
    was = next(k.not_after for k in keys if k.id == key_id)
    problem = retirement_problem(name, key_id, [k for k in keys if k.id != key_id], when=now + GRACE[when],
                                 was=was, now=now)  # said before the question; the edit checks it again
    return page(request, user, "tenant_retire.html", active="tenants", title=_("Retire key %(key)s?", key=key_id),
                name=name,
                key_id=key_id, when=when, when_words=_(GRACE_WORDS[when]), stops_at=now + GRACE[when],
                others=others, last_used=mine.last if mine else None, usage_known=used is not None,
                base=base or await run_in_threadpool(file_base, rt.config), problem=problem,
                status=409 if problem else 200)


ROUTES = [
    Route("/admin/tenants/{name}/test", test_tenant, methods=["POST"]),
    Route("/admin/tenants/{name}/keys", add_tenant_key, methods=["POST"]),
    Route("/admin/tenants/{name}/keys/{key_id}/retire", retire_tenant_key, methods=["POST"]),
]
