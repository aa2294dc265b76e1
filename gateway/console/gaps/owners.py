"""Which indexes a gap group is about, so an owner sees only the gaps of the indexes they own.

A group counts its questions per route label (gateway.console.gaps.record.route_label: route
ids joined by ','): an agent route's name, or 'TENANT/FIRST/SECOND' for a Volcengine route.
Each configured route id names one index; a label of routes no longer configured names none
(only a viewer or an admin sees such a group).
"""

from __future__ import annotations

from gateway.console.gaps.groups import Group
from gateway.console.users import ConsoleUser, can
from gateway.core.config import Config


def route_indexes(config: Config) -> dict[str, str]:
    """Route id → index name, for every tenant route and agent route of `config`."""
    out = {f"{t}/{r.first_level_id}/{r.second_level_id}": r.index
           for t, tenant in config.tenants.items() for r in tenant.routes}
    out.update({name: r.index for name, r in config.agent.routes.items()})
    return out


def group_indexes(group: Group, routes: dict[str, str]) -> list[str]:
    """The indexes `group`'s questions were asked of, sorted."""
    return sorted({routes[rid] for label in group.routes for rid in label.split(",") if rid in routes})


def visible_groups(user: ConsoleUser, groups: list[Group], config: Config) -> tuple[list[Group], dict[str, str]]:
    """The groups `user` may see (users.can 'view_gaps' on one of a group's indexes; viewers and
    admins see all), and for each the index a filing would be about (one the user may file for
    when there is one, else the group's first index, else '')."""
    routes = route_indexes(config)
    shown: list[Group] = []
    about: dict[str, str] = {}
    for g in groups:
        names = group_indexes(g, routes)
        if user.role == "owner" and not any(can(user, "view_gaps", n) for n in names):
            continue
        shown.append(g)
        about[g.id] = next((n for n in names if can(user, "file_gap", n)), names[0] if names else "")
    return shown, about
