"""Whether retiring a key leaves its tenant a key that verifies: one pure rule, used by
`retire_key` (gateway/ops/secrets.py) on the config as the edit would leave it, under the
config's lock, so two retirements at once cannot each count on the other's key.

Rationale: docs/design-notes.md, "gateway/ops/retirement.py".
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence

from gateway.core.config import SecretKey


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def retirement_problem(tenant: str, key_id: str, others: Sequence[SecretKey], *, when: float,
                       was: float | None, now: float) -> str | None:
    """Why retiring key `key_id` of `tenant` so that it stops verifying at `when` leaves the
    tenant with no key that verifies (module doc), in words naming the keys; None when it does not.

    others: the tenant's other keys as the edit leaves them. was: the key's not_after before the
    edit (None: it had none). when, was, now: unix seconds.
    """
    # a key that stops at `now` (retired now, maybe by an edit just before this one) is not live any more
    live = [(math.inf if k.not_after is None else k.not_after, k.id) for k in others
            if k.not_after is None or k.not_after > now]
    if not live:
        return (f"key {key_id} is the only live key of tenant {tenant}: retiring it leaves no live key, and "
                f"every callback would be refused (40105). Add the new key first, then retire {key_id}")
    last_end, last = max(live)
    if last_end <= when:
        return (f"the grace of key {key_id} (until {_iso(when)}) outlasts every other key of tenant {tenant}: "
                f"key {last}, the last of them, stops verifying at {_iso(last_end)}, so from {_iso(when)} no "
                f"key verifies. Retire {key_id} sooner, or add a new key first")
    if last_end < (math.inf if was is None else was):
        return (f"every other key of tenant {tenant} is retiring too: key {last}, the last of them, stops "
                f"verifying at {_iso(last_end)}, and after that no key verifies. Add a new key first, then "
                f"retire {key_id}")
    return None
