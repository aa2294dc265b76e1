"""Who is asking: the console user of a request, from its Bearer header or login cookie.

Rationale: docs/design-notes.md, "gateway/console/session.py".
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import re

from cachetools import LRUCache
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from gateway.console.auth import COOKIE, bearer, new_token, token_ok
from gateway.console.credentials import MAX_CREDENTIAL, hash_credential, verify
from gateway.console.proxy import client_address
from gateway.console.sessions import Sessions
from gateway.console.throttle import Throttle, keys
from gateway.console.users import ConsoleUser, Role
from gateway.core.config import Config

ADMIN = ConsoleUser("admin", "admin")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
SCRYPT_AT_ONCE = 2  # concurrent scrypt checks per process for strangers: each holds 16 MiB and a core
TRUSTED_AT_ONCE = 1  # and for browsers with a device cookie, in a lane of their own
_verified: LRUCache[str, bool] = LRUCache(maxsize=1024)
_lanes: dict[bool, asyncio.Semaphore] = {}


class LoginBusy(Exception):
    """Every scrypt slot of strangers' attempts is taken: try again in a second (module doc)."""


class Throttled(Exception):
    """A login attempt made while one of its keys waits (gateway.console.throttle). wait: whole
    seconds until it may be tried."""

    def __init__(self, wait: int) -> None:
        super().__init__(f"retry after {wait} s")
        self.wait = wait


@functools.cache
def dummy_hash() -> str:
    """A scrypt hash of a random credential nobody knows, made once per process: what an unknown
    user name is checked against, so it costs the same scrypt work as a known one."""
    return hash_credential(new_token())


def console_enabled(config: Config) -> bool:
    """False when neither an admin token nor a user is configured: every /admin path is then 404."""
    return config.admin.token_sha256 is not None or bool(config.admin.users)


def presented(request: Request) -> str | None:
    """The credential a request carries: its Bearer token, else its login cookie."""
    return bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)


def cookie_value(name: str, token: str | None) -> str | None:
    """What the login cookie holds for a login as `name` ('' for the admin token) with `token`:
    the token alone for the admin token, 'name:token' for a console user; None when either
    part is malformed (names are 1-64 of [a-z0-9._-])."""
    if not token or len(token) > MAX_CREDENTIAL:
        return None
    if not name:
        return token
    if not NAME.fullmatch(name) or ":" in token or not token.isprintable() or ";" in token or " " in token:
        return None
    return f"{name}:{token}"


def remembered(config: Config, credential: str) -> bool:
    """Did this worker verify `credential` ('NAME:CREDENTIAL') against the hash configured now?"""
    name, _, _ = credential.partition(":")
    entry = next((u for u in config.admin.users if u.name == name), None)
    return entry is not None and hashlib.sha256(f"{credential}\0{entry.credential}".encode()).hexdigest() in _verified


async def user_of(config: Config, credential: str | None, *, trusted: bool = False) -> ConsoleUser | None:
    """The user `credential` (the admin token, or 'NAME:CREDENTIAL') logs in as, or None.
    trusted: the attempt comes from a browser with a device cookie for the name (its own scrypt
    lane). Raises LoginBusy when a scrypt check is needed and no slot of its lane is free."""
    if credential is None:
        return None
    name, sep, secret = credential.partition(":")
    if not sep:
        return ADMIN if token_ok(credential, config.admin.token_sha256) else None
    entry = next((u for u in config.admin.users if u.name == name), None)
    if not secret:
        return None
    stored = entry.credential if entry is not None else dummy_hash()  # an unknown name costs the same
    key = hashlib.sha256(f"{credential}\0{stored}".encode()).hexdigest()
    if key not in _verified:
        lane = _lanes.get(trusted)
        if lane is None:
            lane = _lanes[trusted] = asyncio.Semaphore(TRUSTED_AT_ONCE if trusted else SCRYPT_AT_ONCE)
        if not trusted and lane.locked():
            raise LoginBusy
        async with lane:
            ok = await run_in_threadpool(verify, secret, stored)
        if not ok or entry is None:
            return None
        _verified[key] = True
    if entry is None:
        return None
    role: Role = entry.role  # type: ignore[assignment]  # one of CONSOLE_ROLES, checked by the config
    return ConsoleUser(entry.name, role, frozenset(entry.indexes))


async def bearer_user(request: Request, config: Config, token: str) -> ConsoleUser | None:
    """The user of `Authorization: Bearer TOKEN` (the admin token, or 'NAME:CREDENTIAL'),
    counted as a login through the form is: a credential this worker verified before, and the
    right admin token (one SHA-256), pass unchecked by the limit; else, while the name's or the
    address's key waits, Throttled without a check; a failure counts against both (the admin
    token has no name key). Raises Throttled, LoginBusy."""
    name, sep, _ = token.partition(":")
    if (sep and remembered(config, token)) or (not sep and token_ok(token, config.admin.token_sha256)):
        return await user_of(config, token)
    throttle: Throttle = request.app.state.login_throttle
    counted = keys(name[:64] if sep else None, client_address(request))
    wait = await throttle.retry_after(counted)
    if wait is not None:
        raise Throttled(wait)
    user = await user_of(config, token)
    if user is None:
        await throttle.failed(counted)
    return user


def user_named(config: Config, name: str | None) -> ConsoleUser | None:
    """The console user called `name` in `config` ('' : the admin token's), or None."""
    if name == "":
        return ADMIN if config.admin.token_sha256 is not None else None
    entry = next((u for u in config.admin.users if u.name == name), None)
    if entry is None:
        return None
    role: Role = entry.role  # type: ignore[assignment]  # one of CONSOLE_ROLES, checked by the config
    return ConsoleUser(entry.name, role, frozenset(entry.indexes))


async def current_user(request: Request) -> ConsoleUser | None:
    """The console user of `request`: by its Bearer credential, else by its login session
    (gateway.console.sessions); None when it carries neither valid. A Bearer credential is
    limited as a login is (`bearer_user`). Raises Throttled, LoginBusy, SessionsUnavailable."""
    config = request.app.state.runtime.config
    token = bearer(request.headers.get("authorization"))
    if token is not None:
        return await bearer_user(request, config, token)
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    sessions: Sessions = request.app.state.sessions
    return user_named(config, await sessions.name_of(config, cookie))
