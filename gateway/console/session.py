"""Who is asking: the console user of a request, from its Bearer header or login cookie.

Two kinds of credential:
- the admin token (`admin.token_sha256`): presented alone, it is the admin named 'admin';
- a console user's credential (`[admin.users.NAME]`): presented as 'NAME:CREDENTIAL'.

The login cookie (gateway.console.auth.COOKIE) holds a signed session, never a credential
(gateway.console.sessions). A user's scrypt check costs about 0.1-0.7 s, so it runs
in a worker thread, at most SCRYPT_AT_ONCE at a time, and a success is remembered per process
(keyed by a SHA-256 of what was presented and the stored hash: a changed or removed user's
old credential stops working at the next config reload). A name no user has is checked against
`dummy_hash()`, so the answer takes the same scrypt work whether the name exists or not.
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
from gateway.console.sessions import Sessions
from gateway.console.users import ConsoleUser, Role
from gateway.core.config import Config

ADMIN = ConsoleUser("admin", "admin")
NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
SCRYPT_AT_ONCE = 2  # concurrent scrypt checks per process: each holds 16 MiB and a core
_verified: LRUCache[str, bool] = LRUCache(maxsize=1024)
_scrypt_slots: asyncio.Semaphore | None = None


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


async def user_of(config: Config, credential: str | None) -> ConsoleUser | None:
    """The user `credential` (the admin token, or 'NAME:CREDENTIAL') logs in as, or None."""
    global _scrypt_slots
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
        if _scrypt_slots is None:
            _scrypt_slots = asyncio.Semaphore(SCRYPT_AT_ONCE)
        async with _scrypt_slots:
            ok = await run_in_threadpool(verify, secret, stored)
        if not ok or entry is None:
            return None
        _verified[key] = True
    if entry is None:
        return None
    role: Role = entry.role  # type: ignore[assignment]  # one of CONSOLE_ROLES, checked by the config
    return ConsoleUser(entry.name, role, frozenset(entry.indexes))


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
    (gateway.console.sessions); None when it carries neither valid."""
    config = request.app.state.runtime.config
    token = bearer(request.headers.get("authorization"))
    if token is not None:
        return await user_of(config, token)
    cookie = request.cookies.get(COOKIE)
    if not cookie:
        return None
    sessions: Sessions = request.app.state.sessions
    return user_named(config, await sessions.name_of(config, cookie))
