"""kbgate's own probes (the console's connectivity test, `kbgate probe`) say so in one header,
so their question is counted as no caller's: no gap, no hit, no question metric.

X-Kbgate-Probe: hex HMAC-SHA-256(the signing key, 'kbgate-probe' U+001F + the request's
X-Content-Signature). It is bound to the one signed request (its signature covers timestamp,
nonce and body), and only a holder of the tenant's key can make it (who could at worst keep
their own questions out of their gap record). Unsigned or not verifying: an ordinary question.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable

from gateway.core.config import Tenant

HEADER = "X-Kbgate-Probe"
_RAW = HEADER.lower().encode("latin-1")


def probe_mark(secret: str, signature: str) -> str:
    """The header's value for a request signed with `secret` whose X-Content-Signature is
    `signature` (64 hex characters)."""
    return hmac.new(secret.encode("utf-8"), b"kbgate-probe\x1f" + signature.encode("latin-1"),
                    hashlib.sha256).hexdigest()


def is_probe(tenant: Tenant, key_id: str | None, signature: str | None,
             raw_headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """True when the request, verified with key `key_id` of `tenant` (None: not verified) and
    signed `signature`, carries a valid probe mark (one header, the right value)."""
    if key_id is None or signature is None:
        return False
    marks = [v for k, v in raw_headers if k.lower() == _RAW]
    key = next((k for k in tenant.secrets if k.id == key_id), None)
    if len(marks) != 1 or key is None:
        return False
    want = probe_mark(key.value.reveal(), signature).encode("ascii")
    return hmac.compare_digest(marks[0].strip().lower(), want)
