"""gateway/core/scope.py: the one scope engine (Agent Access API 技术设计 §8).

Rationale: docs/design-notes.md, "tests/core/test_scope.py".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.core import scope
from gateway.core.config import parse_config
from gateway.core.errors import AccessDenied, ConfigError
from gateway.core.globs import glob_matches, glob_within, intersect_globs
from gateway.core.scope import (
    ALWAYS_EXCLUDED,
    Grant,
    Principal,
    ScopeRequest,
    allows,
    effective_scope,
    narrow,
    resolve_callback,
)
from gateway.volcengine.signing import sign_headers
from tests.support.agent_env import (
    ENV,
    NOW,
    WEBHOOK_SECRET,
    EnvFactory,
    agent_section,
    ok,
)

P = Principal("agent_client", "c")
SEGMENTS = ["a", "b", "ab", "working", "config", "state"]
DATASETS = ["", "d1", "d2", "d3"]

segment = st.sampled_from(SEGMENTS)
paths = st.lists(segment, min_size=1, max_size=4).map("/".join)


@st.composite
def globs(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from([*SEGMENTS, "*", "a*", "?b"]), min_size=0, max_size=3))
    tail = draw(st.sampled_from(["", "/**", "**", "/*"]))
    g = "/".join(parts) + tail
    return g or "**"


glob_sets = st.none() | st.lists(globs(), min_size=0, max_size=3).map(tuple)
dataset_sets = st.none() | st.lists(st.sampled_from(DATASETS), min_size=0, max_size=3, unique=True).map(tuple)
grants = st.builds(Grant, datasets=dataset_sets, path_globs=glob_sets, include_working_docs=st.booleans())
requests = st.builds(ScopeRequest, datasets=dataset_sets, path_globs=glob_sets, include_working_docs=st.booleans())


def _admits(datasets: tuple[str, ...] | None, path_globs: tuple[str, ...] | None, path: str, ds: str) -> bool:
    return (datasets is None or ds in datasets) and (
        path_globs is None or any(glob_matches(g, path) for g in path_globs))


@settings(max_examples=400, deadline=None)
@given(st.lists(grants, min_size=1, max_size=3), requests, st.lists(st.tuples(paths, st.sampled_from(DATASETS)),
                                                                 min_size=1, max_size=20))
def test_effective_scope_is_within_request_and_every_grant(grant_list: list[Grant], request: ScopeRequest,
                                                            docs: list[tuple[str, str]]) -> None:
    try:
        eff = effective_scope(P, ("r",), "idx", grant_list, request)
    except AccessDenied as err:
        assert err.code in ("access.forbidden_scope", "access.dataset_not_allowed")
        return
    f = eff.filter
    if f.datasets is not None:
        for g in grant_list:
            assert g.datasets is None or set(f.datasets) <= set(g.datasets)
        assert request.datasets is None or set(f.datasets) <= set(request.datasets)
    assert f.include_hidden is False
    for path, ds in docs:
        if allows(eff, path, ds, True):
            assert _admits(request.datasets, request.path_globs, path, ds), (path, ds)
            for g in grant_list:
                assert _admits(g.datasets, g.path_globs, path, ds), (path, ds, g)
                if path.startswith("working/"):
                    assert g.include_working_docs and request.include_working_docs
            assert not path.startswith(("config/", "state/"))
        assert not allows(eff, path, ds, False)  # hidden documents: never


@settings(max_examples=400, deadline=None)
@given(globs(), globs(), st.lists(paths, min_size=1, max_size=30))
def test_glob_within_is_sound(inner: str, outer: str, sample: list[str]) -> None:
    if glob_within(inner, outer):
        for p in sample:
            if glob_matches(inner, p):
                assert glob_matches(outer, p), (inner, outer, p)


@settings(max_examples=200, deadline=None)
@given(glob_sets, glob_sets, st.lists(paths, min_size=1, max_size=30))
def test_intersect_globs_is_within_both(a: tuple[str, ...] | None, b: tuple[str, ...] | None,
                                        sample: list[str]) -> None:
    both = intersect_globs(a, b)
    for p in sample:
        if both is None or any(glob_matches(g, p) for g in both):
            assert a is None or any(glob_matches(g, p) for g in a)
            assert b is None or any(glob_matches(g, p) for g in b)


@settings(max_examples=200, deadline=None)
@given(grants, requests)
def test_an_empty_intersection_is_a_denial_not_an_empty_scope(grant: Grant, request: ScopeRequest) -> None:
    try:
        eff = effective_scope(P, ("r",), "idx", [grant], request)
    except AccessDenied:
        return
    assert eff.filter.datasets is None or eff.filter.datasets
    assert eff.filter.path_globs is None or eff.filter.path_globs


def test_narrowing_request_is_honoured() -> None:
    eff = effective_scope(P, ("r",), "i", [Grant(("d1", "d2"), ("guide/**",))],
                          ScopeRequest(("d1",), ("guide/api/**",)))
    assert eff.filter.datasets == ("d1",) and eff.filter.path_globs == ("guide/api/**",)


def test_widening_request_is_denied() -> None:
    with pytest.raises(AccessDenied) as ds:
        effective_scope(P, ("r",), "i", [Grant(("d1",), None)], ScopeRequest(("d1", "d2")))
    assert ds.value.code == "access.dataset_not_allowed"
    with pytest.raises(AccessDenied) as paths_:
        effective_scope(P, ("r",), "i", [Grant(None, ("guide/**",))], ScopeRequest(None, ("ops/**",)))
    assert paths_.value.code == "access.forbidden_scope"


def test_working_docs_need_request_and_policy() -> None:
    with pytest.raises(AccessDenied) as err:
        effective_scope(P, ("r",), "i", [Grant(include_working_docs=False)], ScopeRequest(include_working_docs=True))
    assert err.value.code == "access.forbidden_scope"
    off = effective_scope(P, ("r",), "i", [Grant(include_working_docs=True)], ScopeRequest())
    assert not allows(off, "working/x.md", "", True)
    on = effective_scope(P, ("r",), "i", [Grant(include_working_docs=True)], ScopeRequest(include_working_docs=True))
    assert allows(on, "working/x.md", "", True)
    assert not allows(on, "config/x.md", "", True) and not allows(on, "state/x.md", "", True)


def test_callback_scope_excludes_config_state_and_working(tmp_path: Path) -> None:
    cfg = parse_config({"tenants": {"acme": {"secrets": [{"id": "k", "value_env": "ACME_SECRET"}], "routes": [
        {"first_level_id": "1", "second_level_id": "2", "index": "docs", "path_globs": ["**"]}]}}},
        base_dir=tmp_path, env=ENV)
    eff = resolve_callback(cfg.tenants["acme"], "1", "2", "k")
    assert set(ALWAYS_EXCLUDED) | {"working/**"} <= set(eff.filter.exclude_path_globs)
    assert eff.principal == Principal("volcengine_tenant", "acme", "k")


# ------------------------------------------------------------------ one engine for every caller


@pytest.mark.anyio
async def test_callback_and_agent_endpoints_resolve_through_the_same_function(
        env: EnvFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    real = scope.effective_scope

    def spy(principal: Principal, *args: Any, **kw: Any) -> scope.EffectiveScope:
        seen.append(principal.kind)
        return real(principal, *args, **kw)

    monkeypatch.setattr(scope, "effective_scope", spy)
    e = await env()
    body = '{"FirstLevelId":"tech","SecondLevelId":"software","Query":"密钥轮换","Limit":3}'.encode()
    r = await e.http.post("/volcengine/acme", content=body, headers=sign_headers(WEBHOOK_SECRET, body, NOW))
    assert r.status_code == 200 and r.json()["Ret"] == 0, r.text
    ok(await e.search(), "bailing.agent-knowledge-search.v1")
    ok(await e.get("support"), "bailing.agent-knowledge-capabilities.v1")
    assert seen == ["volcengine_tenant", "agent_client", "agent_client"]


def test_no_second_copy_of_the_scope_rules() -> None:
    """Only gateway/core/scope.py builds a SearchFilter or names the excluded trees."""
    gateway_dir = Path(scope.__file__).parents[1]  # the whole gateway package
    offenders = []
    for py in gateway_dir.rglob("*.py"):
        if py.name == "scope.py":
            continue
        text = py.read_text("utf-8")
        if re.search(r"SearchFilter\(|config/\*\*|state/\*\*|working/\*\*", text):
            offenders.append(py.name)
    assert offenders == []


# ------------------------------------------------------------------ agent config validation


def _agent_cfg(tmp_path: Path, agent: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    data = {"tenants": {"acme": {"secrets": [{"id": "k", "value_env": "ACME_SECRET"}]}}, "agent": agent}
    return parse_config(data, base_dir=tmp_path, env=env or ENV)


def test_agent_config_parses(tmp_path: Path) -> None:
    cfg = _agent_cfg(tmp_path, agent_section())
    alice = cfg.agent.clients["alice"]
    assert alice.policy.datasets is None and alice.policy.path_globs == ("**",)
    assert alice.policy.include_working_docs is False
    assert "alice-token" not in repr(cfg.agent)


@pytest.mark.parametrize(("mutate", "key"), [
    (lambda a: a["clients"]["bob"].update(tools=["knowledge.delete"]), "agent.clients.bob.tools"),
    (lambda a: a["clients"]["bob"].update(routes=["nowhere"]), "agent.clients.bob.routes"),
    (lambda a: a["clients"]["bob"].pop("datasets"), "agent.clients.bob.datasets"),
    (lambda a: a["clients"]["bob"].pop("path_globs"), "agent.clients.bob.path_globs"),
    (lambda a: a["clients"]["bob"].update(tokens=[{"id": "t", "sha256": "ABC"}]), "agent.clients.bob.tokens[0].sha256"),
    (lambda a: a["clients"]["bob"].update(tokens=a["clients"]["alice"]["tokens"]),
     "agent.clients.bob.tokens[0].sha256"),
    (lambda a: a["clients"]["bob"].update(include_working_docs="yes"), "agent.clients.bob.include_working_docs"),
    (lambda a: a["routes"]["support"].update(index="../etc"), "agent.routes.support.index"),
    (lambda a: a["routes"]["support"].update(colour="red"), "agent.routes.support.colour"),
    (lambda a: a.pop("ref_key_env"), "agent.ref_key_env"),
    (lambda a: a.update(ref_key_env="UNSET_VAR"), "agent.ref_key_env"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_agent_config_errors_name_the_key(tmp_path: Path, mutate: Any, key: str) -> None:
    agent = agent_section()
    mutate(agent)
    with pytest.raises(ConfigError) as err:
        _agent_cfg(tmp_path, agent)
    assert err.value.key == key, err.value


def test_ref_key_may_not_equal_a_webhook_secret(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _agent_cfg(tmp_path, agent_section(), env={**ENV, "KBGATE_REF_KEY": WEBHOOK_SECRET})
    assert err.value.key == "agent.ref_key_env"
    assert WEBHOOK_SECRET not in str(err.value)


def test_ref_key_too_short(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        _agent_cfg(tmp_path, agent_section(), env={**ENV, "KBGATE_REF_KEY": "short"})
    assert err.value.key == "agent.ref_key_env"


def test_paths_wholly_inside_excluded_trees_are_a_denial() -> None:
    grant = Grant(datasets=None, path_globs=("**",), include_working_docs=True)
    for globs in (("config/**",), ("state/**",), ("working/**",), ("config/a/**", "state/x.md")):
        with pytest.raises(AccessDenied) as exc:
            effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant], ScopeRequest(path_globs=globs))
        assert exc.value.code == "access.forbidden_scope"
    eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant],
                          ScopeRequest(path_globs=("config/**", "guide/**")))
    assert eff.filter.path_globs == ("guide/**",)
    eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant],
                          ScopeRequest(path_globs=("working/**",), include_working_docs=True))
    assert eff.filter.path_globs == ("working/**",)


def test_excluded_trees_ignore_case() -> None:
    grant = Grant(datasets=None, path_globs=("**",), include_working_docs=False)
    eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant], ScopeRequest())
    for path in ("config/a.md", "CONFIG/a.md", "Config/x/y.md", "State/s.md", "WORKING/w.md"):
        assert not allows(eff, path, "", True), path
    assert allows(eff, "guide/config.md", "", True)


def test_excluded_trees_hold_for_every_name_of_a_document() -> None:
    """A document is out when its path *or* its id lies in an excluded tree (a JSONL record
    with id 'config/secret.md' and no path), in any case, with any leading '/', './' or '\\'."""
    grant = Grant(datasets=None, path_globs=("**",), include_working_docs=False)
    eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant], ScopeRequest())
    for name in ("config/secret.md", "CONFIG/a.md", "/state/s.md", "./config/d.md", "\\config/x", "working/w.md"):
        assert scope.excluded(eff, name), name
        assert not allows(eff, "", "", True, names=(name,)), name
        assert not allows(eff, "guide/ok.md", "", True, names=("guide/ok.md", name)), name
    for name in ("guide/config.md", "configs/a.md", "my-state/x.md", ""):
        assert not scope.excluded(eff, name), name
    assert allows(eff, "", "", True, names=("guide/config.md",))


def test_a_name_that_walks_into_an_excluded_tree_or_out_of_the_globs_is_outside() -> None:
    """'a/../config/x' (a path or id an index built before `indexes.paths` may hold) was served:
    no glob of config/** matched it as written. Names are judged as written and as walked."""
    grant = Grant(datasets=None, path_globs=("**",), include_working_docs=False)
    eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant], ScopeRequest())
    for name in ("a/../config/x", "guide/./../state/s.md", "a\\..\\config\\x", "a/．．/config/x",
                 "x/../../working/w.md", "a//..//config/x"):
        assert scope.excluded(eff, name), name
        assert not allows(eff, name, "", True), name
        assert not allows(eff, "guide/ok.md", "", True, names=(name,)), name
    guide = effective_scope(Principal("agent_client", "c"), ("r",), "docs",
                            [Grant(datasets=None, path_globs=("guide/**",), include_working_docs=False)],
                            ScopeRequest())
    assert not allows(guide, "guide/../ops/a.md", "", True)
    assert allows(guide, "guide/./a.md", "", True) and allows(guide, "guide/a..b/c.md", "", True)


def test_remembered_decisions_are_the_rules_decisions_and_a_name_problem_is_logged_each_time(
        caplog: pytest.LogCaptureFixture) -> None:
    """`allows` remembers its decisions: asked again it answers the same, for every
    scope its own answer, and a document kept out for a name problem is still logged each time."""
    grant = Grant(datasets=("public",), path_globs=("guide/**",), include_working_docs=False)
    narrow_eff = effective_scope(Principal("agent_client", "c"), ("r",), "docs", [grant], ScopeRequest())
    wide = effective_scope(Principal("agent_client", "c"), ("r",), "docs",
                           [Grant(datasets=None, path_globs=("**",), include_working_docs=False)], ScopeRequest())
    cases = [("guide/a.md", "public", True), ("guide/a.md", "private", True), ("ops/a.md", "public", True),
             ("guide/a.md", "public", False), ("config/a.md", "public", True)]
    first = [(allows(narrow_eff, p, d, v), allows(wide, p, d, v)) for p, d, v in cases]
    assert first == [(True, True), (False, True), (False, True), (False, False), (False, False)]
    assert [(allows(narrow_eff, p, d, v), allows(wide, p, d, v)) for p, d, v in cases] == first
    caplog.clear()
    for _ in range(3):
        assert not allows(wide, "guide/bad\u202e.md", "", True)
    assert sum("was not served" in r.getMessage() for r in caplog.records) == 3


# ------------------------------------------------------------------ a tool input narrows a request


def test_input_paths_and_datasets_only_narrow_the_request() -> None:
    asked = ScopeRequest(datasets=("public", "internal"), path_globs=("guide/**",), include_working_docs=True)
    assert narrow(asked) == asked
    got = narrow(asked, paths=("guide/ops/**",), datasets=("public",))
    assert (got.path_globs, got.datasets, got.include_working_docs) == (("guide/ops/**",), ("public",), True)
    assert narrow(ScopeRequest(), paths=("ops/**",), datasets=("x",)) == ScopeRequest(("x",), ("ops/**",))
    with pytest.raises(AccessDenied) as err:
        narrow(asked, paths=("ops/**",))  # no path of the input lies inside the request's
    assert err.value.code == "access.forbidden_scope"
    with pytest.raises(AccessDenied) as err:
        narrow(asked, datasets=("public", "secret"))
    assert err.value.code == "access.dataset_not_allowed"
