"""Console login sessions (gateway.console.sessions): the cookie is a signed session, not the
credential; logout ends it for good, the server ends it after LIFETIME, and changing or removing
the credential it was made with ends it. Through the app, on its fixed clock, with real Redis."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.console.credentials import hash_credential, new_credential
from gateway.console.sessions import LIFETIME, MemorySessions
from gateway.core.clock import FixedClock
from tests.support.configs import ADMIN_TOKEN, NOW, config, parse

pytestmark = pytest.mark.anyio
VERA = new_credential()


def _data(root: Path, redis_url: str | None, prefix: str, credential: str) -> dict[str, Any]:
    data = config(root, admin_token=ADMIN_TOKEN, redis_url=redis_url, key_prefix=prefix)
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(credential)}}
    return data


async def _login(c: httpx.AsyncClient, user: str, token: str) -> str:
    r = await c.post("/admin/login", data={"user": user, "token": token})
    assert r.status_code == 303, r.text
    return r.cookies["kbgate_admin"]


def _with(c: httpx.AsyncClient, cookie: str) -> dict[str, str]:
    return {"cookie": f"kbgate_admin={cookie}"}


@pytest.mark.parametrize("shared", [True, False], ids=["redis", "memory"])
async def test_logout_ends_the_session_and_the_cookie_is_no_credential(tmp_path: Path, start_app: Any,
                                                                       redis_url: str, key_prefix: str,
                                                                       shared: bool) -> None:
    # The cookie was the admin token itself: the same on every login, and still good after logout.
    c, _, _ = await start_app(parse(_data(tmp_path, redis_url if shared else None, key_prefix, VERA), tmp_path))
    one, two = await _login(c, "", ADMIN_TOKEN), await _login(c, "", ADMIN_TOKEN)
    assert one != two and ADMIN_TOKEN not in one + two
    c.cookies.clear()
    assert (await c.get("/admin/", headers=_with(c, one))).status_code == 200
    out = await c.post("/admin/logout", headers=_with(c, one))
    assert out.status_code == 303
    assert (await c.get("/admin/", headers=_with(c, one))).status_code == 401  # the old cookie, replayed
    assert (await c.get("/admin/", headers=_with(c, two))).status_code == 200  # another session lives on
    forged = one[:-2] + ("AA" if not one.endswith("AA") else "BB")
    assert (await c.get("/admin/", headers=_with(c, forged))).status_code == 401
    bearer = {"authorization": f"Bearer vera:{VERA}"}  # tools: unchanged
    assert (await c.get("/admin/overview.json", headers=bearer)).status_code == 200


async def test_the_server_ends_a_session_after_its_lifetime(tmp_path: Path, start_app: Any, redis_url: str,
                                                            key_prefix: str) -> None:
    c, _, clock = await start_app(parse(_data(tmp_path, redis_url, key_prefix, VERA), tmp_path))
    cookie = await _login(c, "vera", VERA)
    c.cookies.clear()
    clock.advance(LIFETIME - 1)
    assert (await c.get("/admin/", headers=_with(c, cookie))).status_code == 200
    clock.advance(1)
    assert (await c.get("/admin/", headers=_with(c, cookie))).status_code == 401


async def test_changing_or_removing_a_credential_ends_its_sessions(tmp_path: Path, start_app: Any,
                                                                   redis_url: str, key_prefix: str) -> None:
    c, app, _ = await start_app(parse(_data(tmp_path, redis_url, key_prefix, VERA), tmp_path))
    vera, admin = await _login(c, "vera", VERA), await _login(c, "", ADMIN_TOKEN)
    c.cookies.clear()
    app.runtime.config = parse(_data(tmp_path, redis_url, key_prefix, new_credential()), tmp_path)  # a reload
    assert (await c.get("/admin/", headers=_with(c, vera))).status_code == 401
    assert (await c.get("/admin/", headers=_with(c, admin))).status_code == 200
    gone = _data(tmp_path, redis_url, key_prefix, VERA)
    gone["admin"]["token_sha256"] = "0" * 64
    app.runtime.config = parse(gone, tmp_path)
    assert (await c.get("/admin/", headers=_with(c, admin))).status_code == 401


async def test_memory_revocations_stay_bounded(tmp_path: Path) -> None:
    cfg = parse(_data(tmp_path, None, "p", VERA), tmp_path)
    s = MemorySessions(FixedClock(float(NOW)).now, max_revoked=5)
    cookies = [await s.issue(cfg, "vera") for _ in range(20)]
    for cookie in cookies:
        await s.revoke(cookie)
    assert len(s._revoked_until) == 5
    assert await s.name_of(cfg, cookies[-1]) is None
