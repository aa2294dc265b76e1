"""Device cookies: a browser that logged in as NAME before may try again while strangers make
NAME's login wait (OWASP Authentication Cheat Sheet, "device cookies").

After a successful login through the form the browser gets `kbgate_device`: {"u": the user name
('' for the admin token), "d": a random device id, "iat": unix s} signed with the session key
(gateway.console.sessions.session_key, its own salt), HttpOnly, SameSite=Strict, path
/admin/login only, Secure over TLS, kept LIFETIME seconds. `device_of(...)` gives the id while
the cookie is valid for the name being logged in as; gateway.console.throttle then skips the
name's and the address's waits for it and counts its failures against the device's own key.
"""

from __future__ import annotations

import secrets
from typing import Any

from itsdangerous import BadSignature, URLSafeSerializer

COOKIE = "kbgate_device"
PATH = "/admin/login"
LIFETIME = 90 * 24 * 3600
SALT = "kbgate-console-device"


def issue(key: bytes, name: str, now: float) -> str:
    """A new device cookie's value for a login as `name`."""
    return str(URLSafeSerializer(key, salt=SALT).dumps({"u": name, "d": secrets.token_urlsafe(12), "iat": int(now)}))


def device_of(key: bytes, cookie: str | None, name: str, now: float) -> str | None:
    """The device id of `cookie` when it is a valid device cookie for `name` issued less than
    LIFETIME ago; else None."""
    if not cookie:
        return None
    try:
        data: Any = URLSafeSerializer(key, salt=SALT).loads(cookie)
    except (BadSignature, UnicodeError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("u") != name or not isinstance(data.get("d"), str) \
            or not isinstance(data.get("iat"), int) or not 0 <= now - data["iat"] < LIFETIME:
        return None
    device: str = data["d"]
    return device
