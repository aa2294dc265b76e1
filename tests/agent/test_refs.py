"""gateway/agent/refs.py: signed refs and cursors, domain-separated keys, clock-driven expiry."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from gateway.agent.refs import CURSOR_LABEL, REF_LABEL, REF_TTL, RefClaims, RefSigner, derive_key
from gateway.core.clock import FixedClock
from gateway.core.errors import KnowledgeError
from gateway.core.types import Secret

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
