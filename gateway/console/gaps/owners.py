"""Which indexes a gap group is about, so an owner sees only the gaps of the indexes they own.

Rationale: docs/design-notes.md, "gateway/console/gaps/owners.py".
"""

from __future__ import annotations

from typing import Any

from gateway.console.gaps.groups import Group
from gateway.console.users import ConsoleUser, can
from gateway.core.config import Config
from gateway.core.config.dials import floor_of


def route_indexes(config: Config) -> dict[str, str]:
    """Route id → index name, for every tenant route and agent route of `config`."""
    out = {f"{t}/{r.first_level_id}/{r.second_level_id}": r.index
           for t, tenant in config.tenants.items() for r in tenant.routes}
    out.update({name: r.index for name, r in config.agent.routes.items()})
    return out


def route_floor(config: Config, routes: tuple[str, ...]) -> float:
    """The relevance floor a question searched over `routes` (route ids) was answered under: the
    lowest of theirs (`floor_of`: a route's own, else search.relevance_floor)."""
    floors = {f"{t}/{r.first_level_id}/{r.second_level_id}": r.relevance_floor
              for t, tenant in config.tenants.items() for r in tenant.routes}
    floors.update({name: r.relevance_floor for name, r in config.agent.routes.items()})
    return min((floor_of(floors.get(r), config.search) for r in routes), default=floor_of(None, config.search))


def group_indexes(group: Group, routes: dict[str, str]) -> list[str]:
    """The indexes `group`'s questions were asked of, sorted."""
    return sorted({routes[rid] for label in group.routes for rid in label.split(",") if rid in routes})


def _words_if(hit: dict[str, Any], keep: bool) -> dict[str, Any]:
    """A near miss with the question's words it lacks ('unmatched') only when `keep`."""
    return hit if keep else {k: v for k, v in hit.items() if k != "unmatched"}


def _indexes_of(labels: tuple[str, ...], routes: dict[str, str]) -> list[str]:
    """The indexes of route `labels` (route ids joined by ',')."""
    return sorted({routes[rid] for label in labels for rid in label.split(",") if rid in routes})


def assignees(config: Config, index: str) -> list[str]:
    """The console users a task of `index` may be given to: every admin (the admin token's
    'admin' too, when set) and the owners of `index`; sorted."""
    names = {u.name for u in config.admin.users if u.role == "admin" or (u.role == "owner" and index in u.indexes)}
    if config.admin.token_sha256:
        names.add("admin")
    return sorted(names)


def reads_text(user: ConsoleUser, indexes: list[str]) -> bool:
    """True when `user` may read the question texts of a group asked of `indexes`: an admin, or
    an owner of one of them (a viewer never; a group of no configured index: admins only)."""
    return user.role == "admin" or (user.role == "owner" and any(n in user.indexes for n in indexes))


def visible_groups(user: ConsoleUser, groups: list[Group], config: Config) -> tuple[list[Group], dict[str, str]]:
    """The groups `user` may see (users.can 'view_gaps' on one of a group's indexes; viewers and
    admins see all), and for each the index a filing would be about (one the user may file for
    when there is one, else the group's first index, else ''). A group whose texts `user` may
    not read (`reads_text`) comes without them (its `examples` emptied); an owner gets only the
    texts of questions asked of an index they own (a group joins near-duplicates across indexes)."""
    routes = route_indexes(config)
    shown: list[Group] = []
    about: dict[str, str] = {}
    for g in groups:
        names = group_indexes(g, routes)
        if user.role == "owner" and not any(can(user, "view_gaps", n) for n in names):
            continue
        if reads_text(user, names) and user.role == "owner":  # a near-duplicate asked of another's index
            kept = [(e, r) for e, r in zip(g.examples, g.example_routes, strict=False)
                    if reads_text(user, _indexes_of(r, routes))]
            g.examples, g.example_routes = [e for e, _ in kept], [r for _, r in kept]
            g.best = [_words_if(h, h.get("index") in user.indexes) for h in g.best]
            g.near = [_words_if(h, h.get("index") in user.indexes) for h in g.near]
        if not reads_text(user, names):  # the texts, and the question's words a near miss lacks
            g.examples, g.example_routes = [], []
            g.best = [_words_if(h, False) for h in g.best]
            g.near = [_words_if(h, False) for h in g.near]
        shown.append(g)
        about[g.id] = next((n for n in names if can(user, "file_gap", n)), names[0] if names else "")
    return shown, about
