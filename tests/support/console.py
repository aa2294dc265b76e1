"""Logging in to the console as a browser does: the login form first (its CSRF cookie and
field, gateway.console.csrf), then the POST."""

from __future__ import annotations

from typing import Any

import httpx

from tests.support.configs import ADMIN_TOKEN

LOGIN_COOKIE = "kbgate_login"
ENGLISH = {"accept-language": "en"}
"""What the test clients send by default: the console answers zh-CN unless asked for English,
and most console tests assert the English text (tests/console/test_i18n.py checks the Chinese)."""


async def login_csrf(c: httpx.AsyncClient) -> str:
    """The login form's csrf value for client `c`: the LOGIN_COOKIE the form set (the form's
    hidden field holds the same), fetched with the form when `c` has none yet."""
    token = c.cookies.get(LOGIN_COOKIE)
    if token is None:
        form = await c.get("/admin/login")
        assert form.status_code == 200, form.status_code
        token = c.cookies.get(LOGIN_COOKIE)
    return token or ""  # '' : a form without one (what a test run against an older server sees)


async def login(c: httpx.AsyncClient, user: str = "", token: str = ADMIN_TOKEN, **kw: Any) -> httpx.Response:
    """POST /admin/login as the form does (fields user, token, csrf); the response."""
    return await c.post("/admin/login", data={"user": user, "token": token, "csrf": await login_csrf(c)}, **kw)


async def logout(c: httpx.AsyncClient, cookie: str | None = None) -> httpx.Response:
    """POST /admin/logout as the page's Log out button does (its csrf value, keyed by the
    session cookie: `cookie`, sent as a header, else the one `c` holds)."""
    from gateway.console.csrf import form_token

    session = cookie or c.cookies.get("kbgate_admin") or ""
    headers = {"cookie": f"kbgate_admin={session}"} if cookie else None
    return await c.post("/admin/logout", data={"csrf": form_token(session, "logout")}, headers=headers)
