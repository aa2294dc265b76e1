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
from gateway.core.config import load_config
from gateway.core.errors import ConfigError
from tests.support.configs import ADMIN_TOKEN, ENV, NOW, config, parse, write
from tests.support.console import login, logout

pytestmark = pytest.mark.anyio
VERA = new_credential()


def _data(root: Path, redis_url: str | None, prefix: str, credential: str) -> dict[str, Any]:
    data = config(root, admin_token=ADMIN_TOKEN, redis_url=redis_url, key_prefix=prefix)
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(credential)}}
    return data


async def _login(c: httpx.AsyncClient, user: str, token: str) -> str:
    r = await login(c, user, token)
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
    out = await logout(c, one)
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


async def test_a_session_key_planted_in_redis_signs_nothing(tmp_path: Path, start_app: Any, redis_url: str,
                                                            key_prefix: str) -> None:
    # Whoever could read (or write) Redis and read the config could mint an admin session.
    import hashlib
    import secrets

    import redis
    from itsdangerous import URLSafeSerializer

    planted = secrets.token_bytes(32)
    redis.Redis.from_url(redis_url).set(f"{key_prefix}:console-session-key", planted)
    c, _, clock = await start_app(parse(_data(tmp_path, redis_url, key_prefix, VERA), tmp_path))
    digest = hashlib.sha256(ADMIN_TOKEN.encode()).hexdigest()  # what the config holds
    fingerprint = hashlib.sha256(f"\0{digest}".encode()).hexdigest()[:16]
    minted = URLSafeSerializer(planted, salt="kbgate-console-session").dumps(
        {"u": "", "sid": "x" * 22, "iat": int(clock.now()), "f": fingerprint})
    assert (await c.get("/admin/", headers=_with(c, minted))).status_code == 401


async def test_the_session_key_lives_beside_the_config_for_its_owner_only_and_outlives_a_restart(
        tmp_path: Path, start_app: Any, redis_url: str, key_prefix: str) -> None:
    path = write(tmp_path / "gateway.toml", _data(tmp_path, redis_url, key_prefix, VERA))
    c, _, _ = await start_app(load_config(path, env=ENV))
    cookie = await _login(c, "vera", VERA)
    key = tmp_path / "console-session.key"  # gateway.console.sessions.KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    again, _, _ = await start_app(load_config(path, env=ENV))  # another worker, or the server restarted
    assert (await again.get("/admin/", headers=_with(again, cookie))).status_code == 200


def test_a_session_secret_file_others_may_read_is_refused_naming_the_key(tmp_path: Path) -> None:
    secret = tmp_path / "session-key"
    secret.write_text("s" * 40 + "\n")
    secret.chmod(0o644)
    data = _data(tmp_path, None, "p", VERA)
    data["admin"]["session_secret_file"] = str(secret)
    with pytest.raises(ConfigError) as info:
        parse(data, tmp_path)
    assert info.value.key == "admin.session_secret_file" and "s" * 40 not in str(info.value)
    secret.chmod(0o600)
    assert parse(data, tmp_path).admin.session_secret is not None


async def test_while_redis_is_away_the_console_says_so_instead_of_the_login_form(
        tmp_path: Path, start_app: Any) -> None:
    # A login "succeeded" and the next page was the login form again, with no reason given.
    from tests.support.redis_procs import RedisProc

    proc = RedisProc(tmp_path).start()
    try:
        c, _, _ = await start_app(parse(_data(tmp_path, proc.url, "away", VERA), tmp_path))
        assert (await _login(c, "", ADMIN_TOKEN))
        assert (await c.get("/admin/")).status_code == 200
        proc.stop()
        page = await c.get("/admin/")
        assert page.status_code == 503 and "Redis" in page.text and 'name="token"' not in page.text, page.text[-600:]
        c.cookies.delete("kbgate_admin")
        r = await login(c, "", ADMIN_TOKEN)
        assert r.status_code == 503 and "Redis" in r.text and "kbgate_admin=" not in r.headers.get("set-cookie", "")
    finally:
        proc.stop()
