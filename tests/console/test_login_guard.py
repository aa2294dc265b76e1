"""Logins that cannot be turned against their users (gateway/console/login.py, session.py,
throttle.py, device.py, proxy.py, csrf.py), through the app under its lifespan with a real
Redis: strangers' failures slow the strangers, not the admin token nor a browser that logged in
before; Bearer guesses count as logins; scrypt checks of strangers never make a known browser
wait; login and logout refuse cross-site posts; the Secure flag follows a trusted proxy."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.console import session
from gateway.console.credentials import hash_credential, new_credential
from tests.support.configs import ADMIN_TOKEN, config, parse
from tests.support.console import ENGLISH, login, login_csrf, logout

pytestmark = pytest.mark.anyio
VERA = new_credential()
FREE_USER = 5  # gateway.console.throttle.FREE["user"]: failures of a name before it waits


def _config(tmp_path: Path, redis_url: str, key_prefix: str, **server: Any) -> Any:
    data = config(tmp_path, admin_token=ADMIN_TOKEN, redis_url=redis_url, key_prefix=key_prefix,
                  **({"server": server} if server else {}))
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": hash_credential(VERA)}}
    return parse(data, tmp_path)


def _at(c: httpx.AsyncClient, address: str) -> httpx.AsyncClient:
    """A browser of its own (no cookies) at `address`, on the app `c` talks to."""
    app = c._transport.app  # type: ignore[attr-defined]
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=(address, 40000)),
                             base_url="http://kbgate", headers=ENGLISH)


async def test_strangers_failing_as_the_admin_token_never_hold_its_login(tmp_path: Path, start_app: Any,
                                                                        redis_url: str, key_prefix: str) -> None:
    # Five wrong admin tokens held the admin token's login for everyone for 300 s.
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    strangers = [_at(c, f"203.0.113.{i + 1}") for i in range(4)]
    for i in range(FREE_USER * 4):
        r = await login(strangers[i % 4], token=f"wrong-guess-number-{i:04d}")
        assert r.status_code == 401, r.status_code
    r = await login(_at(c, "198.51.100.2"))
    assert r.status_code == 303, r.text[-500:]


async def test_strangers_at_the_same_address_never_hold_the_right_admin_token(
        tmp_path: Path, start_app: Any, redis_url: str, key_prefix: str) -> None:
    # 40 wrong admin tokens from 127.0.0.1 made the right one, sent by a tool there, answer 429.
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    codes = [(await login(_at(c, "127.0.0.1"), token=f"wrong-guess-number-{i:04d}")).status_code for i in range(40)]
    assert set(codes) == {401, 429} and codes[-1] == 429, codes  # the address's guesses wait
    tool = _at(c, "127.0.0.1")
    r = await tool.get("/admin/overview.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    assert r.status_code == 200, r.text[-500:]
    r = await tool.get("/admin/overview.json", headers={"authorization": "Bearer wrong-guess-number-0040"})
    assert r.status_code == 429  # a wrong one from there still waits
    assert (await login(_at(c, "127.0.0.1"))).status_code == 303  # and the form with the right one logs in
    assert (await login(_at(c, "127.0.0.1"), token="wrong-guess-number-0041")).status_code == 429


async def test_a_browser_that_logged_in_before_is_not_held_by_strangers_failing_as_its_name(
        tmp_path: Path, start_app: Any, redis_url: str, key_prefix: str) -> None:
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    vera = _at(c, "198.51.100.2")
    assert (await login(vera, "vera", VERA)).status_code == 303
    assert (await logout(vera)).status_code == 303
    for i in range(FREE_USER + 3):
        await login(_at(c, f"203.0.113.{i + 1}"), "vera", f"guess-{i:04d}-xxxxxxxxxxxxxxxxxx")
    held = await login(_at(c, "203.0.113.99"), "vera", VERA)
    assert held.status_code == 429 and int(held.headers["retry-after"]) >= 1  # a new browser waits
    r = await login(vera, "vera", VERA)  # the browser that logged in before does not
    assert r.status_code == 303, r.text[-500:]


async def test_bearer_guesses_count_as_failed_logins(tmp_path: Path, start_app: Any, redis_url: str,
                                                     key_prefix: str) -> None:
    # Guesses through Authorization: Bearer NAME:GUESS were not counted at all.
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    tool = _at(c, "203.0.113.7")
    for i in range(FREE_USER + 1):
        r = await tool.get("/admin/overview.json", headers={"authorization": f"Bearer vera:guess-{i:04d}"})
        assert r.status_code == 401
    r = await _at(c, "203.0.113.8").get("/admin/overview.json", headers={"authorization": f"Bearer vera:{VERA}"})
    assert r.status_code == 429 and r.headers["retry-after"] == "1" and "Too many failed logins" in r.json()["error"]
    form = await login(_at(c, "203.0.113.9"), "vera", VERA)
    assert form.status_code == 429  # the form and Bearer count against the same name


async def test_strangers_scrypt_checks_never_make_a_known_browser_wait(tmp_path: Path, start_app: Any,
                                                                       redis_url: str, key_prefix: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    vera = _at(c, "198.51.100.2")
    assert (await login(vera, "vera", VERA)).status_code == 303
    assert (await logout(vera)).status_code == 303
    session._verified.clear()  # a restarted worker: the credential must be checked again
    release, started = threading.Event(), threading.Semaphore(0)
    real = session.verify  # type: ignore[attr-defined]

    def slow_for_strangers(secret: str, stored: str) -> bool:
        if secret.startswith("guess"):
            started.release()
            release.wait(30)
        return bool(real(secret, stored))

    monkeypatch.setattr(session, "verify", slow_for_strangers)
    strangers = [_at(c, f"203.0.113.{i + 1}") for i in range(3)]
    tries = [asyncio.create_task(login(s, "vera", f"guess-{i}")) for i, s in enumerate(strangers[:2])]
    for _ in range(2):  # both strangers' checks hold their slots
        assert await asyncio.to_thread(started.acquire, True, 10)
    busy = await login(strangers[2], "vera", "guess-2")
    assert busy.status_code == 503 and busy.headers["retry-after"] == "1"  # refused at once, not queued
    r = await login(vera, "vera", VERA)  # the known browser's own lane
    assert r.status_code == 303, r.text[-500:]
    release.set()
    assert [t.status_code for t in await asyncio.gather(*tries)] == [401, 401]


async def test_login_and_logout_refuse_cross_site_posts(tmp_path: Path, start_app: Any, redis_url: str,
                                                        key_prefix: str) -> None:
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix))
    r = await c.post("/admin/login", data={"token": ADMIN_TOKEN})  # a form on another site: no csrf
    assert r.status_code == 403 and "kbgate_admin=" not in r.headers.get("set-cookie", "")
    csrf = await login_csrf(c)
    r = await c.post("/admin/login", data={"token": ADMIN_TOKEN, "csrf": csrf},
                     headers={"origin": "https://evil.example"})
    assert r.status_code == 403
    assert (await login(c)).status_code == 303
    r = await c.post("/admin/logout")  # without the page's csrf value
    assert r.status_code == 403 and (await c.get("/admin/")).status_code == 200  # still logged in
    assert (await logout(c)).status_code == 303 and (await c.get("/admin/")).status_code == 303  # no cookie left


@pytest.mark.parametrize(("trusted", "secure"), [(["127.0.0.1"], True), ([], False)])
async def test_the_cookie_is_secure_when_a_trusted_proxy_says_the_client_used_tls(
        tmp_path: Path, start_app: Any, redis_url: str, key_prefix: str, trusted: list[str], secure: bool) -> None:
    # X-Forwarded-Proto was ignored: no Secure flag behind a TLS-terminating proxy.
    c, _, _ = await start_app(_config(tmp_path, redis_url, key_prefix, trusted_proxies=trusted))  # peer 127.0.0.1
    headers = {"x-forwarded-proto": "https", "origin": "https://kbgate", "host": "kbgate"}
    form = await c.get("/admin/login", headers=headers)
    csrf = c.cookies.get("kbgate_login")
    assert csrf is not None and ("secure" in form.headers["set-cookie"].lower()) == secure
    r = await c.post("/admin/login", data={"token": ADMIN_TOKEN, "csrf": csrf},  # a browser sends a Secure
                     headers={**headers, "cookie": f"kbgate_login={csrf}"})        # cookie over https
    if not secure:  # an untrusted peer's https is not believed: the https Origin is then another site's
        assert r.status_code == 403
        return
    assert r.status_code == 303
    session_cookie = next(v for v in r.headers.get_list("set-cookie") if v.startswith("kbgate_admin="))
    assert "secure" in session_cookie.lower()
