"""gateway/core/refs.py: signed refs and cursors, domain-separated keys, clock-driven expiry, the
holder binding and the re-check of a read by reference (against a private copy of the test index)."""

from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from gateway.core import retrieve
from gateway.core.clock import FixedClock
from gateway.core.config import AgentClient, AgentPolicy, AgentRoute, Config
from gateway.core.errors import DependencyUnavailable, KnowledgeError
from gateway.core.refs import (
    CURSOR_LABEL,
    REF_LABEL,
    REF_TTL,
    Holder,
    RefClaims,
    RefSigner,
    check_holder,
    derive_key,
    holder,
    read_by_ref,
)
from gateway.core.runtime import Runtime
from gateway.core.scope import (
    EffectiveScope,
    Principal,
    agent_configuration,
    configuration_revision,
    resolve_agent,
    scope_revision,
)
from gateway.core.types import Secret
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.configs import agent_section, config, parse
from tests.support.documents import AGENT_DOCS

MASTER = Secret("ref-master-key-0123456789-abcdefghijklmnop")
NOW = 1_800_000_000
CLAIMS = RefClaims(client="alice", session="s1", on_behalf_of=None, route="support", run_id=None,
                   scope_revision="a" * 64, doc_id="guide/key-rotation.md", revision="b" * 64,
                   expires_at=NOW + REF_TTL)


def _signer(master: Secret = MASTER) -> RefSigner:
    return RefSigner(master, FixedClock(float(NOW)))


def _invalid(fn, *args) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(KnowledgeError) as err:
        fn(*args)
    assert err.value.code == "knowledge_reference_invalid" and err.value.status == 400


def test_derive_key_known_answer() -> None:
    # pinned vector: HMAC-SHA256(key=b"k" * 32, msg=b"kbgate agent-knowledge ref v1")
    assert derive_key(Secret("k" * 32), REF_LABEL).hex() == (
        "46f816200908c462203d04669b055f5d6159490d190bbc8686416f7253a9e7d4")


def test_keys_are_domain_separated() -> None:
    ref_key, cursor_key = derive_key(MASTER, REF_LABEL), derive_key(MASTER, CURSOR_LABEL)
    assert ref_key != cursor_key
    assert MASTER.reveal().encode() not in (ref_key, cursor_key)


def test_ref_round_trip() -> None:
    s = _signer()
    token = s.mint_ref(CLAIMS)
    assert s.open_ref(token) == CLAIMS
    assert MASTER.reveal() not in token


def test_ref_from_another_master_key_is_invalid() -> None:
    token = _signer(Secret("another-master-key-0123456789-abcdefghij")).mint_ref(CLAIMS)
    _invalid(_signer().open_ref, token)


@pytest.mark.parametrize("at", [0, 10, -1, -10])
def test_any_changed_character_is_invalid(at: int) -> None:
    s = _signer()
    token = s.mint_ref(CLAIMS)
    i = at % len(token)
    bad = token[:i] + ("A" if token[i] != "A" else "B") + token[i + 1:]
    _invalid(s.open_ref, bad)


@pytest.mark.parametrize("token", [None, 5, "", "x" * 3000, "ä.b", "a b", "abc", "abc.def"])
def test_malformed_tokens_are_invalid(token: object) -> None:
    _invalid(_signer().open_ref, token)


def test_ref_and_cursor_do_not_verify_as_each_other() -> None:
    s = _signer()
    ref = s.mint_ref(CLAIMS)
    cursor = s.mint_cursor(ref, 10, 30)
    _invalid(s.open_ref, cursor)
    _invalid(s.open_cursor, ref, ref)


def test_cursor_is_bound_to_its_ref() -> None:
    s = _signer()
    ref = s.mint_ref(CLAIMS)
    other = s.mint_ref(replace(CLAIMS, doc_id="other.md"))
    cursor = s.mint_cursor(ref, 10, 30)
    c = s.open_cursor(cursor, ref)
    assert (c.offset, c.consumed, c.expires_at) == (10, 30, NOW + REF_TTL)
    _invalid(s.open_cursor, cursor, other)


def test_expiry_follows_the_injected_clock() -> None:
    clock = FixedClock(float(NOW))
    s = RefSigner(MASTER, clock)
    exp = s.expiry()
    assert exp == NOW + 300
    clock.advance(300)
    assert not s.expired(exp)
    clock.advance(0.5)
    assert s.expired(exp)


def test_signed_but_ill_shaped_claims_are_invalid() -> None:
    s = _signer()
    _invalid(s.open_ref, s._refs.dumps({"client": "alice"}))  # correctly signed, fields missing
    _invalid(s.open_ref, s._refs.dumps(asdict(CLAIMS) | {"expires_at": "soon"}))
    _invalid(s.open_ref, s._refs.dumps(asdict(CLAIMS) | {"scope_revision": "short"}))
    _invalid(s.open_ref, s._refs.dumps([1, 2, 3]))


def test_signed_but_ill_shaped_cursors_are_invalid() -> None:
    s = _signer()
    ref = s.mint_ref(CLAIMS)
    good = s.open_cursor(s.mint_cursor(ref, 10, 20), ref)
    assert (good.offset, good.consumed) == (10, 20)

    def cursor(**over: object) -> str:
        return str(s._cursors.dumps(asdict(good) | over))

    def opened(token: str) -> None:
        s.open_cursor(token, ref)

    _invalid(opened, str(s._cursors.dumps({"offset": 1})))  # correctly signed, fields missing
    _invalid(opened, cursor(extra=1))  # a field it does not have
    _invalid(opened, cursor(offset=-1))
    _invalid(opened, cursor(consumed=True))  # a boolean is not a count
    _invalid(opened, cursor(expires_at="later"))
    _invalid(opened, cursor(ref_digest=7))


# ------------------------------------------------------------------ holders


def test_mint_for_binds_the_holder_and_expires_after_the_ttl() -> None:
    s = _signer()
    who = Holder("alice", "s1", "u-7", "support", None)
    token, expires = s.mint_for(who, "a" * 64, "guide/key-rotation.md", "b" * 64)
    claims = s.open_ref(token)
    assert expires == NOW + REF_TTL == claims.expires_at
    assert (claims.client, claims.session, claims.on_behalf_of, claims.route, claims.run_id) == (
        "alice", "s1", "u-7", "support", None)
    assert (claims.scope_revision, claims.doc_id, claims.revision) == ("a" * 64, "guide/key-rotation.md", "b" * 64)
    check_holder(claims, who)


@pytest.mark.parametrize("field", ["client", "session", "on_behalf_of", "route", "run_id"])
def test_a_ref_is_refused_to_any_other_holder(field: str) -> None:
    who = Holder("alice", "s1", None, "support", None)
    claims = _signer().open_ref(_signer().mint_for(who, "a" * 64, "d", "b" * 64)[0])
    _invalid(check_holder, claims, replace(who, **{field: "other"}))


def test_holder_of_a_call_comes_from_the_client_and_principal() -> None:
    principal = Principal("agent_client", "alice", "t1", "token:t1", "u-7")
    client = AgentClient("alice", (), AgentPolicy(routes=("support",), tools=(), path_globs=("**",)))
    assert holder(client, principal, "support", "run") == Holder("alice", "token:t1", "u-7", "support", "run")


# ------------------------------------------------------------------ read_by_ref


@pytest.fixture(name="setting")
def _setting(private_index: Path, tmp_path: Path) -> tuple[Runtime, Config]:
    cfg = parse(config(tmp_path, tenants=[], indexes=private_index, agent=agent_section()), tmp_path)
    return Runtime(cfg), cfg


def _minted(rt: Runtime, cfg: Config, doc_id: str = "guide/key-rotation.md", client: str = "alice",
            legacy: bool = False) -> tuple[AgentRoute, AgentClient, EffectiveScope, RefClaims]:
    """A ref as search mints it; `legacy`: as the older ref format minted it (bound to the
    generation-inclusive scope revision)."""
    c = cfg.agent.clients[client]
    principal = Principal("agent_client", client, "t1", "token:t1")
    route, eff = resolve_agent(cfg.agent, c, principal, "support", "knowledge.read")
    doc, generation = retrieve.read(rt, eff, doc_id)
    assert doc is not None
    revision = (scope_revision(eff, agent_configuration(route, c), generation) if legacy
                else configuration_revision(eff, agent_configuration(route, c)))
    s = _signer()
    token, _ = s.mint_for(holder(c, principal, "support"), revision, doc_id, doc.revision)
    return route, c, eff, s.open_ref(token)


def _refused(code: str, rt: Runtime, route: AgentRoute, c: AgentClient, eff: EffectiveScope,
             claims: RefClaims) -> None:
    with pytest.raises(KnowledgeError) as err:
        read_by_ref(rt, route, c, eff, claims)
    assert err.value.code == code


def test_read_by_ref_returns_the_document_and_the_current_revision(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    doc, revision = read_by_ref(rt, route, c, eff, claims)
    assert doc.doc_id == "guide/key-rotation.md" and "新旧两把密钥" in doc.text
    assert revision == scope_revision(eff, agent_configuration(route, c), retrieve.generation(rt, eff))
    assert revision != claims.scope_revision  # the answer's revision covers the generation, the ref's does not


def _commit(rt: Runtime, cfg: Config, docs: list[Document]) -> None:
    IndexStore(cfg.indexes_dir).create_or_open_for_write("docs").ingest(docs, progress=False)
    rt.indexes.open("docs").maybe_reload(force=True)


def test_a_ref_outlives_a_commit_that_changed_other_documents(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    before = retrieve.generation(rt, eff)
    _commit(rt, cfg, [Document("guide/new.md", "新文档", (Section("", "新内容。"),), path="guide/new.md")])
    assert retrieve.generation(rt, eff) != before
    doc, _ = read_by_ref(rt, route, c, eff, claims)
    assert doc.doc_id == "guide/key-rotation.md"


def test_a_ref_minted_before_issue_16_verifies_until_the_index_commits(setting: tuple[Runtime, Config]) -> None:
    """The decision for refs already issued: bound to the generation-inclusive revision, they
    keep their old binding (readable while the index has not committed) and expire as usual."""
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg, legacy=True)
    assert read_by_ref(rt, route, c, eff, claims)[0].doc_id == "guide/key-rotation.md"
    _commit(rt, cfg, [Document("guide/new.md", "新文档", (Section("", "新内容。"),), path="guide/new.md")])
    _refused("knowledge_scope_changed", rt, route, c, eff, claims)


def test_a_ref_to_a_document_that_moved_out_of_the_scope_is_a_document_change(
        setting: tuple[Runtime, Config]) -> None:
    """Same title and text, but its path moved into working/**: the document changed (its
    revision covers what is indexed of it), the configuration did not."""
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    top = next(d for d in AGENT_DOCS if d.id == "guide/key-rotation.md")
    _commit(rt, cfg, [replace(top, path="working/key-rotation.md")])
    _refused("knowledge_changed", rt, route, c, eff, claims)


def test_a_ref_whose_id_lies_in_an_excluded_tree_is_refused(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    _commit(rt, cfg, [Document("config/jsonl.md", "配置", (Section("", "口令。"),))])  # a JSONL record, no path
    route, c, eff, claims = _minted(rt, cfg, doc_id="config/jsonl.md")
    _refused("knowledge_changed", rt, route, c, eff, claims)


def test_read_by_ref_refuses_a_disabled_route(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    _refused("knowledge_scope_changed", rt, replace(route, enabled=False), c, eff, claims)


def test_read_by_ref_refuses_a_changed_document(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    _refused("knowledge_changed", rt, route, c, eff, replace(claims, revision="c" * 64))
    _refused("knowledge_changed", rt, route, c, eff, replace(claims, doc_id="guide/gone.md"))
    _refused("knowledge_changed", rt, route, c, eff, replace(claims, doc_id="guide/hidden.md"))


def test_read_by_ref_refuses_a_changed_scope(setting: tuple[Runtime, Config]) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)
    _refused("knowledge_scope_changed", rt, route, c, eff, replace(claims, scope_revision="d" * 64))
    other = replace(c, policy=replace(c.policy, datasets=("public",)))  # the policy the revision covers moved
    _refused("knowledge_scope_changed", rt, route, other, eff, claims)


def test_read_by_ref_when_the_index_is_down(setting: tuple[Runtime, Config], monkeypatch: pytest.MonkeyPatch) -> None:
    rt, cfg = setting
    route, c, eff, claims = _minted(rt, cfg)

    def down(name: str) -> Any:
        raise DependencyUnavailable("index_unavailable", f"index {name!r} is not available")

    monkeypatch.setattr(rt, "index", down)
    _refused("knowledge_unavailable", rt, route, c, eff, claims)
