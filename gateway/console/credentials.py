"""Console users' credentials: made here, stored only as a scrypt hash, checked in constant time.

Rationale: docs/design-notes.md, "gateway/console/credentials.py".
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

N, R, P = 2**14, 8, 5
SALT_BYTES, HASH_BYTES = 16, 32
MAX_CREDENTIAL = 256  # characters: longer input is refused before any hashing


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(credential: str, salt: bytes, n: int, r: int, p: int) -> bytes:
    return hashlib.scrypt(credential.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=HASH_BYTES,
                          maxmem=256 * n * r + 1024 * 1024 * 64)


def new_credential() -> str:
    """A fresh credential: 43 URL-safe characters (256 random bits)."""
    return secrets.token_urlsafe(32)


def hash_credential(credential: str) -> str:
    """The value to store for `credential`: 'scrypt$16384$8$5$SALT$HASH'."""
    salt = secrets.token_bytes(SALT_BYTES)
    return f"scrypt${N}${R}${P}${_b64(salt)}${_b64(_scrypt(credential, salt, N, R, P))}"


def verify(credential: str | None, stored: str) -> bool:
    """True when `credential` hashes to `stored` (constant-time comparison). False for None, an
    empty or over-long credential, or a stored value not in the format (never raises)."""
    if not credential or len(credential) > MAX_CREDENTIAL:
        return False
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        got = _scrypt(credential, _unb64(salt), int(n), int(r), int(p))
        return hmac.compare_digest(got, _unb64(digest))
    except (ValueError, MemoryError):
        return False
