"""Verify and produce X-Content-Signature (the 联网问答Agent callback spec, "签名校验").

Rationale: docs/design-notes.md, "gateway/volcengine/signing.py".
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from gateway.core.config import SecretKey, Tenant
from gateway.core.errors import MalformedRequest, VerificationFailed

TIMESTAMP_HEADER = "x-content-timestamp"
NONCE_HEADER = "x-content-nonce"
SIGNATURE_HEADER = "x-content-signature"
SIGNING_HEADERS = (TIMESTAMP_HEADER, NONCE_HEADER, SIGNATURE_HEADER)

# ASCII-only classes: \d would also accept other Unicode digits.
_TIMESTAMP = re.compile(r"[0-9]{10}")
NONCE_PATTERN = re.compile(r"[A-Za-z0-9]{6,32}")  # the 联网问答Agent callback spec: 6-32 letters and digits
_NONCE = NONCE_PATTERN
_SIGNATURE = re.compile(r"[0-9a-fA-F]{64}")


@dataclass(frozen=True, slots=True)
class SigningHeaders:
    """The three signing headers as sent (latin-1 decoded strings), each possibly None."""

    timestamp: str | None
    nonce: str | None
    signature: str | None


@dataclass(frozen=True, slots=True)
class Verdict:
    """What verification concluded about one callback, whichever the tenant's mode.

    signature: 'verified' | 'unsigned' (report mode, no signature) | 'failed'.
    reason: why not verified, a Ret reason ('header_missing', 'timestamp_expired',
        'signature_mismatch', 'no_live_key'), or None when verified.
    key_id: the key that matched (verified only). keys_tried: ids of the live keys checked
        (never values). skew_seconds: now − timestamp in seconds (3 decimals) when a valid
        timestamp was present, else None.
    claim: (timestamp as sent: 10 digits, nonce) to claim against replay, or None when nothing
        may be claimed (no timestamp and nonce, or a timestamp outside the tolerance, whose
        claim could not expire correctly).
    refusal: the error to answer with (enforce mode, not verified), or None: the request goes on.
    """

    signature: str
    reason: str | None = None
    key_id: str | None = None
    keys_tried: tuple[str, ...] = ()
    skew_seconds: float | None = None
    claim: tuple[str, str] | None = None
    refusal: VerificationFailed | None = None


def signing_headers(raw_headers: Iterable[tuple[bytes, bytes]]) -> SigningHeaders:
    """Pick the three signing headers out of ASGI raw headers.

    raw_headers: (lower-case name bytes, value bytes) pairs as ASGI delivers them.
    Raises MalformedRequest('header_repeated') when one appears more than once.
    """
    found: dict[str, str] = {}
    for name, value in raw_headers:
        n = name.decode("latin-1").lower()
        if n in SIGNING_HEADERS:
            if n in found:
                raise MalformedRequest("header_repeated", f"header {_title(n)} appears more than once")
            found[n] = value.decode("latin-1")
    return SigningHeaders(found.get(TIMESTAMP_HEADER), found.get(NONCE_HEADER), found.get(SIGNATURE_HEADER))


def check_formats(h: SigningHeaders) -> tuple[str, str, str]:
    """Check presence and format of the signing headers; return (timestamp, nonce, signature).

    timestamp: exactly 10 ASCII digits (unix seconds); nonce: 6-32 ASCII letters and
    digits, case-sensitive; signature: 64 hex characters (the 联网问答Agent callback spec, "签名参数").
    Raises MalformedRequest('header_missing') or VerificationFailed(timestamp_invalid |
    nonce_invalid | signature_invalid).
    """
    if h.timestamp is None or h.nonce is None or h.signature is None:
        name = next(n for n, v in zip(SIGNING_HEADERS, (h.timestamp, h.nonce, h.signature), strict=True) if v is None)
        raise MalformedRequest("header_missing", f"header {_title(name)} is missing")
    return _timestamp(h.timestamp), _nonce(h.nonce), _signature(h.signature)


def _timestamp(value: str) -> str:
    if not _TIMESTAMP.fullmatch(value):
        raise VerificationFailed("timestamp_invalid")
    return value


def _nonce(value: str) -> str:
    if not _NONCE.fullmatch(value):
        raise VerificationFailed("nonce_invalid")
    return value


def _signature(value: str) -> str:
    if not _SIGNATURE.fullmatch(value):
        raise VerificationFailed("signature_invalid")
    return value


def verify(tenant: Tenant, h: SigningHeaders, body: bytes, now: float, tolerance: int) -> Verdict:
    """Verify one callback per the tenant's mode (callback spec, "签名校验"); the verdict says what to record.

    enforce: a signature that does not verify yields a verdict whose `refusal` must be answered.
    report (the 联网问答Agent callback spec "接入流程" 3-4: the console's 测试 is sent before the key is shown): a
    missing or failing signature is recorded ('unsigned' | 'failed') and the request goes on,
    but only while `now` is before the tenant's report_until: after it, whatever the file says,
    the tenant is verified as in enforce mode (`Tenant.mode`), so an onboarding killed before it
    could restore the config leaves no tenant open.
    In both modes the headers that are present are format-checked, and a valid (timestamp,
    nonce) inside the tolerance is claimed against replay.
    h: the signing headers as sent; body: the raw bytes; now: unix seconds (the one clock);
    tolerance: seconds. Raises MalformedRequest('header_missing') when a header is absent
    (enforce) and VerificationFailed(timestamp_invalid | nonce_invalid | signature_invalid)
    for a malformed header (both modes).
    """
    reporting = tenant.mode(now) == "report"
    if reporting and h.signature is None:
        ts = _timestamp(h.timestamp) if h.timestamp is not None else None
        nonce = _nonce(h.nonce) if h.nonce is not None else None
        if ts is None or nonce is None:
            return Verdict("unsigned", "header_missing")
        skew = now - int(ts)
        return Verdict("unsigned", "header_missing", skew_seconds=round(skew, 3),
                       claim=(ts, nonce) if abs(skew) <= tolerance else None)
    ts, nonce, sig = check_formats(h)
    skew = round(now - int(ts), 3)
    tried = tuple(k.id for k in tenant.secrets if k.live(now))
    try:
        check_tolerance(ts, now, tolerance)
        key_id = match_key(tenant.secrets, ts, nonce, sig, body, now)
    except VerificationFailed as err:
        if not reporting:
            return Verdict("failed", err.code, None, tried, skew, None, err)
        claim = None if err.code == "timestamp_expired" else (ts, nonce)
        return Verdict("failed", err.code, None, tried, skew, claim)
    return Verdict("verified", None, key_id, tried, skew, (ts, nonce))


def check_tolerance(timestamp: str, now: float, tolerance: int) -> int:
    """Return the timestamp as int when |now − ts| ≤ tolerance (both directions).

    timestamp: 10 ASCII digits, unix seconds (already format-checked). now: unix seconds.
    tolerance: seconds (the 联网问答Agent callback spec: at most 3600). Raises VerificationFailed('timestamp_expired').
    """
    ts = int(timestamp)
    if abs(now - ts) > tolerance:
        raise VerificationFailed("timestamp_expired")
    return ts


def compute_signature(secret: str, timestamp: str, nonce: str, body: bytes) -> str:
    """Lowercase hex HMAC-SHA256(secret, timestamp + nonce + body) (the 联网问答Agent callback spec "签名步骤").

    secret: the key as UTF-8 text; timestamp, nonce: header strings as sent; body: raw bytes.
    """
    mac = hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha256)
    mac.update(timestamp.encode("ascii"))
    mac.update(nonce.encode("ascii"))
    mac.update(body)
    return mac.hexdigest()


def match_key(keys: Iterable[SecretKey], timestamp: str, nonce: str, signature: str, body: bytes, now: float) -> str:
    """Return the id of the first live key whose HMAC equals `signature`.

    Compares in constant time on bytes; every live key is tried (rotation: the 联网问答Agent callback spec has
    one key, a tenant here may hold several while rotating). Upper-case hex is accepted
    since it denotes the same digest.
    Raises VerificationFailed('no_live_key' | 'signature_mismatch').
    """
    wanted = signature.lower().encode("ascii")
    live = [k for k in keys if k.live(now)]
    if not live:
        raise VerificationFailed("no_live_key")
    matched: str | None = None
    for key in live:
        got = compute_signature(key.value.reveal(), timestamp, nonce, body).encode("ascii")
        if hmac.compare_digest(got, wanted) and matched is None:
            matched = key.id
    if matched is None:
        raise VerificationFailed("signature_mismatch")
    return matched


def sign_headers(secret: str, body: bytes, timestamp: int, nonce: str | None = None) -> dict[str, str]:
    """Headers a Volcengine agent would send for `body` (for `kbgate sign`, probes and tests).

    timestamp: unix seconds. nonce: 6-32 ASCII alphanumerics; a random 16-char one when None.
    """
    nonce = nonce or new_nonce()
    ts = f"{timestamp:010d}"
    return {
        "Content-Type": "application/json",
        "X-Content-Timestamp": ts,
        "X-Content-Nonce": nonce,
        "X-Content-Signature": compute_signature(secret, ts, nonce, body),
    }


def new_nonce(length: int = 16) -> str:
    """A random nonce of ASCII letters and digits."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    return "".join(secrets.choice(alphabet) for _ in range(length))


def _title(lower_name: str) -> str:
    return "-".join(part.capitalize() for part in lower_name.split("-"))
