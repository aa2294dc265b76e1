"""gateway/ops/retirement.py: one test per reason a retirement is refused, its boundaries, and
the retirements that keep a key verifying."""

from __future__ import annotations

from gateway.core.config import SecretKey
from gateway.core.types import Secret
from gateway.ops.retirement import retirement_problem

NOW = 1_800_000_000.0


def key(kid: str, not_after: float | None = None) -> SecretKey:
    return SecretKey(kid, Secret("v" * 32), not_after)


def test_the_only_live_key_is_refused() -> None:
    assert "only live key of tenant acme" in (retirement_problem("acme", "a", [], when=NOW, was=None, now=NOW) or "")
    gone = [key("b", NOW - 1), key("c", NOW)]  # retired before, or right now by another edit
    assert "only live key" in (retirement_problem("acme", "a", gone, when=NOW + 3600, was=None, now=NOW) or "")


def test_a_grace_that_outlasts_every_other_key_is_refused_naming_the_last() -> None:
    others = [key("b", NOW + 600), key("c", NOW + 1800)]
    why = retirement_problem("acme", "a", others, when=NOW + 3600, was=None, now=NOW) or ""
    assert "the grace of key a" in why and "key c, the last of them" in why
    assert retirement_problem("acme", "a", others, when=NOW + 1800, was=None, now=NOW) is not None  # ends together
    assert "retiring too" in (retirement_problem("acme", "a", others, when=NOW + 1799, was=None, now=NOW) or "")


def test_every_other_key_retiring_is_refused() -> None:
    others = [key("old", NOW + 3600)]
    assert "key old, the last of them" in (retirement_problem("acme", "new", others, when=NOW, was=None,
                                                              now=NOW) or "")
    # a key that was to stop later than every other one: brought forward, it still leaves nothing after
    assert retirement_problem("acme", "a", others, when=NOW, was=NOW + 7200, now=NOW) is not None


def test_a_retirement_that_leaves_a_key_verifying_passes() -> None:
    assert retirement_problem("acme", "old", [key("new")], when=NOW, was=None, now=NOW) is None
    assert retirement_problem("acme", "old", [key("new")], when=NOW + 86400, was=None, now=NOW) is None
    # bringing a retiring key forward, or pushing it back, while another key stays
    assert retirement_problem("acme", "old", [key("new")], when=NOW, was=NOW + 3600, now=NOW) is None
    # keys with planned ends: the other one lasts as long as this one would have
    assert retirement_problem("acme", "a", [key("b", NOW + 9000)], when=NOW, was=NOW + 9000, now=NOW) is None
