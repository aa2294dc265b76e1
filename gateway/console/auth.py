"""The admin token: only its SHA-256 is configured (`admin.token_sha256`).

Rationale: docs/design-notes.md, "gateway/console/auth.py".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

COOKIE = "kbgate_admin"
_TOKEN = re.compile(r"[A-Za-z0-9._~+/=-]{16,256}")  # base64/url-safe/hex tokens: cookie-safe


def token_digest(token: str) -> str:
    """Lower-case hex SHA-256 of `token` (UTF-8): the value for `admin.token_sha256`."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A fresh admin token: 43 URL-safe characters (256 random bits)."""
    return secrets.token_urlsafe(32)


def token_ok(presented: str | None, digest_hex: str | None) -> bool:
    """True when `presented` hashes to `digest_hex` (64 hex chars). False when either is None,
    the token is not 16–256 characters of [A-Za-z0-9._~+/=-], or the digests differ (constant time)."""
    if presented is None or digest_hex is None or not _TOKEN.fullmatch(presented):
        return False
    return hmac.compare_digest(hashlib.sha256(presented.encode("ascii")).digest(), bytes.fromhex(digest_hex))


def bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value, or None."""
    if not authorization:
        return None
    scheme, _, value = authorization.partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None
