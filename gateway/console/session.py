"""Who is asking: the console user of a request, from its Bearer header or login cookie.

The cookie (gateway.console.auth.COOKIE) holds what the user typed at login, as the admin
token's cookie always did: the server keeps no session state and only digests, so reading
the config never yields a usable credential.
"""

from __future__ import annotations

import re

from starlette.requests import Request

from gateway.console.auth import COOKIE, bearer, token_ok
from gateway.console.users import ConsoleUser
from gateway.core.config import Config

ADMIN = ConsoleUser("admin", "admin")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")


def console_enabled(config: Config) -> bool:
    """False when no admin token is configured: every /admin path then answers 404."""
    return config.admin.token_sha256 is not None


def presented(request: Request) -> str | None:
    """The credential a request carries: its Bearer token, else its login cookie."""
    return bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)


def cookie_value(name: str, token: str | None) -> str | None:
    """What the login cookie holds for a login as `name` ('' for the admin token) with `token`:
    the token alone for the admin token, 'name:token' for a console user; None when either
    part is malformed (names are 1-64 of [a-z0-9._-])."""
    if token is None:
        return None
    if not name:
        return token
    if not NAME.fullmatch(name) or ":" in token:
        return None
    return f"{name}:{token}"


def user_of(config: Config, credential: str | None) -> ConsoleUser | None:
    """The user `credential` logs in as, or None."""
    if token_ok(credential, config.admin.token_sha256):
        return ADMIN
    return None


def current_user(request: Request) -> ConsoleUser | None:
    """The console user of `request`, or None when it carries no valid credential."""
    return user_of(request.app.state.runtime.config, presented(request))
