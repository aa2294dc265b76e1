"""The scope engine: what may this caller see?

Rationale: docs/design-notes.md, "gateway/core/scope.py".
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from functools import lru_cache

import orjson

from gateway.core.config import AgentClient, AgentConfig, AgentRoute, Route, Tenant
from gateway.core.errors import AccessDenied, NotFound
from gateway.core.globs import glob_matches, glob_within, intersect_globs
from gateway.core.validate import clip
from indexes.filters import exclusion_regex
from indexes.invisible import name_problem, readable_name
from indexes.paths import normal_name
from indexes.types import SearchFilter

log = logging.getLogger("kbgate.scope")

# Never searchable or readable through any route, whatever a policy says (Agent Access API 技术设计).
ALWAYS_EXCLUDED: tuple[str, ...] = ("config/**", "state/**")
# Working documents: hidden unless the request and every grant include them (Agent Access API 技术设计 §8).
WORKING_DOCS: tuple[str, ...] = ("working/**",)


@dataclass(frozen=True, slots=True)
class Principal:
    """Who is asking.

    kind: 'volcengine_tenant' | 'agent_client'; id: tenant or client id.
    key_id: the signing key or token id that authenticated the request (None when unsigned).
    session: the agent session (header X-Agent-Session, else the token id); None for tenants.
    on_behalf_of: the end user an agent acts for (header X-On-Behalf-Of), or None.
    """

    kind: str
    id: str
    key_id: str | None = None
    session: str | None = None
    on_behalf_of: str | None = None


@dataclass(frozen=True, slots=True)
class Grant:
    """One side of the intersection: what a route or a policy allows.

    datasets / path_globs: None = no restriction from this grant; a tuple = only these.
    """

    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    include_working_docs: bool = False


@dataclass(frozen=True, slots=True)
class ScopeRequest:
    """What the caller asks for; None = "all the grants allow". Can only narrow."""

    datasets: tuple[str, ...] | None = None
    path_globs: tuple[str, ...] | None = None
    include_working_docs: bool = False


@dataclass(frozen=True, slots=True)
class EffectiveScope:
    """The resolved scope of one request: one index and the filter applied inside it.

    route: (FirstLevelId, SecondLevelId) for the callback, (route name,) for agents.
    index: index name under indexes.dir.
    """

    principal: Principal
    route: tuple[str, ...]
    index: str
    filter: SearchFilter

    @property
    def include_working_docs(self) -> bool:
        return not any(g in self.filter.exclude_path_globs for g in WORKING_DOCS)

    def summary(self) -> dict[str, object]:
        """A log/audit-safe description (no document text, no secrets)."""
        return {
            "index": self.index,
            "route": list(self.route),
            "datasets": list(self.filter.datasets) if self.filter.datasets is not None else None,
            "path_globs": list(self.filter.path_globs) if self.filter.path_globs is not None else None,
            "include_working_docs": self.include_working_docs,
        }


# ------------------------------------------------------------------ pure set algebra


ALLOWS_MEMO = 16_384  # (filter, path, dataset, visibility, names) decisions remembered by `allows`


@lru_cache(maxsize=256)
def _exclusion(glob: str) -> re.Pattern[str]:
    return re.compile(exclusion_regex(glob))


def excluded(eff: EffectiveScope, name: str) -> bool:
    """Does `name` — a document's path, id or any other name it can be reached by — lie in a
    tree `eff` never shows (config/**, state/**, working/** without the opt-in)? Case and a
    leading run of '.', '/', '\\' and invisible characters are ignored, as the index filter
    ignores them, and the name is also matched as a person reads it
    (`indexes.invisible.readable_name`: zero-width, bidi and control characters out, NFKC),
    so `con\u200bfig/x` and full-width `ｃｏｎｆｉｇ/x` lie in config/**; and as walked
    (`indexes.paths.normal_name`), so `a/../config/x` does too."""
    return _excluded_by(eff.filter.exclude_path_globs, name)


def _excluded_by(globs: tuple[str, ...], name: str) -> bool:
    if not globs:
        return False
    read = readable_name(name)
    return any(_exclusion(g).fullmatch(n) is not None for g in globs for n in {name, read, normal_name(read)})


def _intersect_datasets(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if a is None:
        return b
    if b is None:
        return a
    return tuple(d for d in a if d in b)


def effective_scope(principal: Principal, route: tuple[str, ...], index: str,
                    grants: Sequence[Grant], request: ScopeRequest) -> EffectiveScope:
    """request ∩ every grant → EffectiveScope, or a denial (Agent Access API 技术设计 §8).

    Raises AccessDenied: 'access.dataset_not_allowed' when the request names a dataset
    outside the grants or the grants share none; 'access.forbidden_scope' when no path
    remains (paths wholly inside config/**, state/** or, without the opt-in, working/**
    count as none) or working docs are asked for without every grant allowing them.
    """
    datasets: tuple[str, ...] | None = None
    globs: tuple[str, ...] | None = None
    for g in grants:
        datasets = _intersect_datasets(datasets, g.datasets)
        globs = intersect_globs(globs, g.path_globs)
    if datasets is not None and not datasets:
        raise AccessDenied("access.dataset_not_allowed", "the route and the policy share no dataset")
    if request.datasets is not None:
        outside = [d for d in request.datasets if datasets is not None and d not in datasets]
        if outside or not request.datasets:
            raise AccessDenied("access.dataset_not_allowed", "a requested dataset is not allowed")
        datasets = tuple(dict.fromkeys(request.datasets))
    globs = intersect_globs(globs, request.path_globs)
    if globs is not None and not globs:
        raise AccessDenied("access.forbidden_scope", "the requested paths are outside the policy")
    if request.include_working_docs and not all(g.include_working_docs for g in grants):
        raise AccessDenied("access.forbidden_scope", "working docs are not allowed by the policy")
    excluded = ALWAYS_EXCLUDED + (() if request.include_working_docs else WORKING_DOCS)
    if globs is not None:
        # A glob wholly inside an excluded tree can match nothing visible: drop it, and
        # when nothing is left the request asked only for what no caller may see.
        globs = tuple(g for g in globs if not any(glob_within(g, x) for x in excluded))
        if not globs:
            raise AccessDenied("access.forbidden_scope", "the requested paths are never readable")
    return EffectiveScope(
        principal=principal,
        route=route,
        index=index,
        filter=SearchFilter(datasets=datasets, path_globs=globs, exclude_path_globs=excluded,
                            include_hidden=False),
    )


def allows(eff: EffectiveScope, path: str, dataset: str, qa_visible: bool, *, names: tuple[str, ...] = ()) -> bool:
    """Would a document with this path/dataset/visibility be inside `eff`? The same rule
    the index filter applies, for re-checking hits and documents read by id or reference.

    names: the document's other names (its id, any alias): none may lie in an excluded tree
    (`excluded`); the path globs of a grant select by tree path only. A document whose path,
    dataset or other name holds a control or format character or a non-character
    (`indexes.invisible.name_problem`: an index built before ingest refused them) is never
    inside a scope, with one warning log line (the reason, never the name).
    """
    problem, inside = _judged(eff.filter, path, dataset, qa_visible, names)
    if problem is not None:
        log.warning("a document whose name %s was not served (rebuild its index: ingest refuses such names)",
                    problem)
    return inside


@lru_cache(maxsize=ALLOWS_MEMO)
def _judged(f: SearchFilter, path: str, dataset: str, qa_visible: bool,
            names: tuple[str, ...]) -> tuple[str | None, bool]:
    """(the name problem that keeps the document out, or None; whether it is inside `f`): a pure
    function of its arguments, remembered (the same documents come back callback after
    callback, and the check's name folding and glob matching cost ~14 us a hit)."""
    for n in (path, dataset, *names):
        problem = name_problem(n)
        if problem is not None:
            return problem, False
    if not qa_visible and not f.include_hidden:
        return None, False
    if f.datasets is not None and dataset not in f.datasets:
        return None, False
    if f.path_globs is not None and not all(any(glob_matches(g, p) for g in f.path_globs)
                                            for p in {path, normal_name(path)}):
        return None, False
    return None, not any(_excluded_by(f.exclude_path_globs, n) for n in (path, *names))


def allows_path(eff: EffectiveScope, path: str) -> bool:
    """Could a visible document at `path` be inside `eff`, whatever its dataset? `allows`
    without the dataset test, asked about a path before any index is touched."""
    return allows(dataclasses.replace(eff, filter=dataclasses.replace(eff.filter, datasets=None)), path, "", True)


def narrow(request: ScopeRequest, *, paths: tuple[str, ...] | None = None,
           datasets: tuple[str, ...] | None = None) -> ScopeRequest:
    """`request` narrowed further by a tool input's own paths and datasets (which can only
    narrow, never widen, what the request asked for).

    Raises AccessDenied: 'access.forbidden_scope' when the paths share nothing with the
    request's, 'access.dataset_not_allowed' when a dataset is outside the request's.
    """
    globs = request.path_globs
    if paths is not None:
        globs = paths if globs is None else intersect_globs(paths, globs)
        if not globs:
            raise AccessDenied("access.forbidden_scope", "the input paths are outside the request scope")
    wanted = request.datasets
    if datasets is not None:
        if wanted is not None and any(d not in wanted for d in datasets):
            raise AccessDenied("access.dataset_not_allowed", "a dataset of the input is outside the request scope")
        wanted = datasets
    return ScopeRequest(datasets=wanted, path_globs=globs, include_working_docs=request.include_working_docs)


# ------------------------------------------------------------------ callers


def route_grant(route: Route | AgentRoute) -> Grant:
    """The grant of a configured route (callback or agent): its datasets and path globs.

    A route does not decide about working docs: the caller's policy and the request do
    (Agent Access API 技术设计: both must opt in), so a route grant never vetoes them.
    """
    return Grant(datasets=route.datasets, path_globs=route.path_globs, include_working_docs=True)


def resolve_callback(tenant: Tenant, first_level_id: str, second_level_id: str, key_id: str | None) -> EffectiveScope:
    """Resolve a Volcengine callback's knowledge path to an effective scope.

    first_level_id, second_level_id: the Body fields as strings (the 联网问答Agent callback spec).
    key_id: the id of the key that verified the request, None in report mode unsigned.
    Raises NotFound('route_unknown') naming the pair when the tenant has no such route.
    The tenant's policy is its routes; the request is the whole route.
    """
    route = tenant.route(first_level_id, second_level_id)
    if route is None:
        raise NotFound(
            "route_unknown",
            f"no knowledge route for FirstLevelId={clip(first_level_id, 64)!r}, "
            f"SecondLevelId={clip(second_level_id, 64)!r}",
        )
    return effective_scope(
        Principal("volcengine_tenant", tenant.name, key_id),
        (first_level_id, second_level_id),
        route.index,
        [route_grant(route)],
        ScopeRequest(),
    )


def policy_grant(client: AgentClient) -> Grant:
    p = client.policy
    return Grant(datasets=p.datasets, path_globs=p.path_globs, include_working_docs=p.include_working_docs)


def require_tool(client: AgentClient, tool: str) -> None:
    """Raise AccessDenied('access.forbidden_tool') unless the client's policy grants `tool`
    (Agent Access API 技术设计 §8: tools a policy does not name are denied)."""
    if tool not in client.policy.tools:
        raise AccessDenied("access.forbidden_tool", f"tool {tool!r} is not allowed for this client")


def resolve_agent(agent: AgentConfig, client: AgentClient, principal: Principal, route_name: str,
                  tool: str | None, request: ScopeRequest = ScopeRequest()) -> tuple[AgentRoute, EffectiveScope]:
    """Resolve an agent client's request on a workspace route (Agent Access API 技术设计 §8).

    tool: the tool being called ('knowledge.search', 'knowledge.read'), None for
    capabilities (route access only). Raises AccessDenied: 'access.forbidden_scope' for a
    route (or its index) outside the policy, including routes that do not exist (so a
    client cannot probe route names); 'access.forbidden_tool' for a tool not granted; and
    the denials of `effective_scope`.
    """
    p = client.policy
    route = agent.routes.get(route_name)
    if route is None or route_name not in p.routes:
        raise AccessDenied("access.forbidden_scope", "the route is not allowed for this client")
    if p.indexes is not None and route.index not in p.indexes:
        raise AccessDenied("access.forbidden_scope", "the route's index is not allowed for this client")
    if tool is not None:
        require_tool(client, tool)
    eff = effective_scope(principal, (route_name,), route.index,
                          [route_grant(route), policy_grant(client)], request)
    return route, eff


def resolve_agent_routes(agent: AgentConfig, client: AgentClient, principal: Principal, tool: str,
                         request: ScopeRequest, named: tuple[str, ...] | None = None,
                         ) -> list[tuple[AgentRoute, EffectiveScope]]:
    """Resolve a request over several routes (Agent Access API 技术设计 §8): each route's effective scope.

    named: the routes the caller asked for (each must resolve, else its denial is raised);
    None = every route of the client's policy, where a route the request cannot use is
    skipped (a disabled one silently) and only when none is left is the last denial raised.
    Raises AccessDenied as `resolve_agent` does ('access.forbidden_tool' always).
    """
    out: list[tuple[AgentRoute, EffectiveScope]] = []
    last: AccessDenied | None = None
    for name in named or client.policy.routes:
        if named is None and name in agent.routes and not agent.routes[name].enabled:
            continue  # a disabled route the caller did not ask for is not a partial answer
        try:
            out.append(resolve_agent(agent, client, principal, name, tool, request))
        except AccessDenied as exc:
            if named is not None or exc.code == "access.forbidden_tool":
                raise
            last = exc
    if not out:
        raise last or AccessDenied("access.forbidden_scope", "no route of the policy is open to this request")
    return out


def scope_revision(eff: EffectiveScope, configured: Mapping[str, object], generation: int | None) -> str:
    """knowledge_scope_revision: SHA-256 hex over the effective knowledge configuration.

    It covers the effective scope (index, datasets, globs, exclusions), the configuration
    it came from (`configured`: e.g. the route and policy as dicts) and the index
    generation, so it changes whenever any of them changes.
    """
    payload = {
        "v": 1,
        "route": list(eff.route),
        "index": eff.index,
        "filter": asdict(eff.filter),
        "configured": configured,
        "generation": generation,
    }
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def configuration_revision(eff: EffectiveScope, configured: Mapping[str, object]) -> str:
    """What a ref binds of the knowledge configuration (Agent知识按需搜索与读取 "引用绑定…完整知识配置及文档
    标题/正文SHA256修订"): SHA-256 hex over the effective scope and the configuration it came
    from — `scope_revision` without the index generation, so that a commit that changed other
    documents leaves a ref readable (the ref's document revision guards its own document).
    Never equal to a `scope_revision` (its payload is of another version)."""
    payload = {"v": 2, "route": list(eff.route), "index": eff.index, "filter": asdict(eff.filter),
               "configured": configured}
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def agent_configuration(route: AgentRoute, client: AgentClient) -> dict[str, object]:
    """The configuration an agent scope revision covers (never the token hashes)."""
    return {"route": asdict(route), "policy": asdict(client.policy), "client": client.id}
