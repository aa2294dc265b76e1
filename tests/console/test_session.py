"""Who a credential logs in as (gateway.console.session): an unknown user name costs the same
scrypt work as a known one, so the answer's time does not tell which names exist."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.console import session
from gateway.console.credentials import hash_credential, new_credential
from tests.support.configs import ADMIN_TOKEN, config, parse

pytestmark = pytest.mark.anyio


async def test_an_unknown_user_costs_the_same_scrypt_work_as_a_known_one(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    # A wrong credential for a user took ~0.8 s (scrypt), for an unknown name ~0.03 s.
    good = new_credential()
    data = config(tmp_path, admin_token=ADMIN_TOKEN)
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(good)}}
    cfg = parse(data, tmp_path)
    calls: list[str] = []
    real = session.verify  # type: ignore[attr-defined]

    def counted(credential: str | None, stored: str) -> bool:
        calls.append(stored.split("$")[0])
        return real(credential, stored)

    monkeypatch.setattr(session, "verify", counted)
    assert await session.user_of(cfg, "vera:not-the-credential") is None
    known = len(calls)
    assert await session.user_of(cfg, "nobody:not-the-credential") is None
    assert (known, len(calls) - known) == (1, 1) and calls == ["scrypt", "scrypt"]
    user: Any = await session.user_of(cfg, f"vera:{good}")
    assert user is not None and user.name == "vera"
