"""Device cookies: a browser that logged in as NAME before may try again while strangers make
NAME's login wait (OWASP Authentication Cheat Sheet, "device cookies").

Rationale: docs/design-notes.md, "gateway/console/device.py".
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
