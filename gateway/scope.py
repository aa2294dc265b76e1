"""The scope engine: what may this caller see?

Every endpoint asks here, whoever the caller is. A request names a knowledge path;
the caller's principal carries a policy; the effective scope is their intersection,
never wider than either, and an empty intersection is a denial, not an empty result
(seed 002, "有效范围"). The Volcengine callback is the first caller: its principal is
the tenant (identified by callback path and verified key), its request is the
(FirstLevelId, SecondLevelId) pair (seed 003, "Body"), and its policy is the tenant's
configured routes.
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.config import Route, Tenant
from gateway.errors import NotFound
from indexes.types import SearchFilter

# Never searchable or readable through any route, whatever a policy says (seed 002).
ALWAYS_EXCLUDED: tuple[str, ...] = ("config/**", "state/**")


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking. kind: 'volcengine_tenant' | 'agent_client'; id: tenant or client id;
    key_id: the signing key or token id that authenticated the request (None when unsigned)."""

    kind: str
    id: str
    key_id: str | None = None


@dataclass(frozen=True, slots=True)
class EffectiveScope:
    """The resolved scope of one request: one index and the filter applied inside it.

    route: (FirstLevelId, SecondLevelId) as requested. index: index name under indexes.dir.
    """

    principal: Principal
    route: tuple[str, str]
    index: str
    filter: SearchFilter

    def summary(self) -> dict[str, object]:
        """A log/audit-safe description (no document text, no secrets)."""
        return {
            "index": self.index,
            "route": list(self.route),
            "datasets": list(self.filter.datasets) if self.filter.datasets is not None else None,
            "path_globs": list(self.filter.path_globs) if self.filter.path_globs is not None else None,
        }


def route_filter(route: Route) -> SearchFilter:
    """The SearchFilter a configured route allows: its datasets and path globs, minus
    the paths no caller may ever see."""
    return SearchFilter(
        datasets=route.datasets,
        path_globs=route.path_globs,
        exclude_path_globs=ALWAYS_EXCLUDED,
        include_hidden=False,
    )


def resolve_callback(tenant: Tenant, first_level_id: str, second_level_id: str, key_id: str | None) -> EffectiveScope:
    """Resolve a Volcengine callback's knowledge path to an effective scope.

    first_level_id, second_level_id: the Body fields as strings (seed 003).
    key_id: the id of the key that verified the request, None in report mode unsigned.
    Raises NotFound('route_unknown') naming the pair when the tenant has no such route.
    """
    route = tenant.route(first_level_id, second_level_id)
    if route is None:
        raise NotFound(
            "route_unknown",
            f"no knowledge route for FirstLevelId={_clip(first_level_id)!r}, "
            f"SecondLevelId={_clip(second_level_id)!r}",
        )
    return EffectiveScope(
        principal=Principal("volcengine_tenant", tenant.name, key_id),
        route=(first_level_id, second_level_id),
        index=route.index,
        filter=route_filter(route),
    )


def _clip(s: str, n: int = 64) -> str:
    return s if len(s) <= n else s[:n] + "…"
