"""Try from a question alone: the route a try runs on when its form names none — the first
route the user may use (an owner: one to an index they own; anyone else: any), tenant routes
first (by tenant, in the config's order), then agent routes (the first client that has one).

    with_default_route(config, user, form) → the form, side a's route filled in when blank
"""

from __future__ import annotations

from collections.abc import Mapping

from gateway.console.users import ConsoleUser
from gateway.core.config import Config

ROUTE_FIELDS = ("tenant", "first", "second", "client", "route")


def _may(user: ConsoleUser, index: str) -> bool:
    return user.role != "owner" or index in user.indexes


def default_route(config: Config, user: ConsoleUser) -> dict[str, str]:
    """Side a's caller and route fields for the first route `user` may use ({} when none)."""
    for name in sorted(config.tenants):
        for r in config.tenants[name].routes:
            if _may(user, r.index):
                return {"a_caller": "volcengine", "a_tenant": name, "a_first": r.first_level_id,
                        "a_second": r.second_level_id}
    for client_id in sorted(config.agent.clients):
        for route in config.agent.clients[client_id].policy.routes:
            agent_route = config.agent.routes.get(route)
            if agent_route is not None and _may(user, agent_route.index):
                return {"a_caller": "knowledge", "a_client": client_id, "a_route": route}
    return {}


def with_default_route(config: Config, user: ConsoleUser, form: Mapping[str, str]) -> dict[str, str]:
    """`form` with side a's route filled in (`default_route`) when it names no route at all and
    its caller is the default (volcengine) or blank; otherwise `form` unchanged."""
    out = dict(form)
    if out.get("a_caller", "volcengine") not in ("", "volcengine"):
        return out
    if any(out.get("a_" + k, "").strip() for k in ROUTE_FIELDS):
        return out
    return {**out, **default_route(config, user)}
