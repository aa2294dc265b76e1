"""gateway.console.gaps.states: the reopen rule, marks and filings, and both stores (memory; a
real Redis) with their bound."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from gateway.console.gaps.states import DAY, GroupState, MemoryStates, RedisStates, filed, marked, status

pytestmark = pytest.mark.anyio
NOW = 1_800_000_000.0


def test_a_resolved_group_asked_again_reopens_and_an_ignored_one_stays_ignored() -> None:
    assert status(None, NOW) == "open"
    done = filed(None, index="docs", record="T-1", who="otto", now=NOW)
    assert status(done, NOW) == "filed" and done.filed == 1 and done.record == "T-1"
    resolved = marked(done, "resolved", index="docs", who="otto", now=NOW + 10)
    assert status(resolved, NOW + 5) == "resolved"  # its last question came before the mark
    assert status(resolved, NOW + 10) == "resolved"
    assert status(resolved, NOW + 11) == "reopened"  # asked again after it was marked
    ignored = marked(done, "ignored", index="docs", who="otto", now=NOW + 10)
    assert status(ignored, NOW + 1000) == "ignored"


def test_reopening_by_hand_keeps_the_filing_and_a_refiling_counts() -> None:
    done = filed(None, index="docs", record="T-1", who="otto", now=NOW)
    again = filed(marked(done, "resolved", index="", who="a", now=NOW + 1), index="", record="T-1", who="a",
                  now=NOW + 2)
    assert (again.state, again.filed, again.index, again.filed_by) == ("filed", 2, "docs", "a")
    assert marked(done, "open", index="docs", who="a", now=NOW).state == "filed"
    assert marked(None, "open", index="docs", who="a", now=NOW).state == "open"
    with pytest.raises(ValueError, match="one of"):
        marked(None, "filed", index="docs", who="a", now=NOW)


@pytest.fixture(name="states", params=["memory", "redis"])
async def _states(request: pytest.FixtureRequest, redis_url: str, key_prefix: str) -> AsyncIterator[object]:
    if request.param == "memory":
        yield MemoryStates()
        return
    store = RedisStates(redis_url, key_prefix)
    yield store
    await store.close()


async def test_states_are_kept_per_group_and_expired_ones_dropped(states: MemoryStates | RedisStates) -> None:
    old = GroupState("resolved", "docs", at=NOW - 40 * DAY)
    await states.put("old", old, {"old"}, NOW - 40 * DAY, 30)
    await states.put("gone", GroupState("ignored", at=NOW - 31 * DAY), set(), NOW - 31 * DAY, 30)
    assert set(await states.all()) == {"old", "gone"}
    await states.put("new", filed(None, index="kb", record="T-9", who="a", now=NOW), {"old", "new"}, NOW, 30)
    got = await states.all()
    # 'gone' names no live group and changed over keep_days ago; 'old' still names a live group
    assert set(got) == {"old", "new"} and got["old"] == old and got["new"].record == "T-9"
