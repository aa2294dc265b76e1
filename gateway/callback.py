"""The Volcengine knowledge callback endpoint: one straight path per request.

raw body + headers → signing (formats → tolerance → HMAC over every live key)
→ replay claim → parse Body → scope → search → envelope → replay `answered` → 200.
Any failure: the same envelope with a non-zero Ret and the HTTP status of its class
(gateway.errors.RET_TABLE), and the replay claim released so a retry is answered
(gateway.replay). No input produces a 500.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gateway import signing
from gateway.bodies import BodyLimitExceeded, asgi_chunks, json_media_problem, read_limited
from gateway.errors import (
    BodyTimeout,
    CallbackError,
    ClientDisconnected,
    DependencyUnavailable,
    MethodNotAllowed,
    PayloadTooLarge,
    Replayed,
    UnsupportedMedia,
    VerificationFailed,
)
from gateway.replay import claim_expiry, nonce_key
from gateway.scope import resolve_callback
from gateway.types import CallbackRequest
from gateway.volcengine import error_body, parse_body, success_body

if TYPE_CHECKING:
    from gateway.app import Runtime
    from gateway.config import Tenant

log = logging.getLogger("kbgate.callback")

# A caller's X-Request-Id is echoed and logged when it is a plain token; anything else
# (too long, spaces, non-ASCII) is replaced so logs cannot be forged or bloated through it.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_RESPONSE_HEADERS = [
    (b"content-type", b"application/json; charset=utf-8"),
    (b"cache-control", b"no-store"),
]


@dataclass(slots=True)
class Delivery:
    """What happened to one callback, for logs, metrics and the deliveries record.

    Never holds a secret; `query` is kept only for debug logs and the opt-in admin view.
    latency_ms: milliseconds from first byte handled to response built.
    signature: 'verified' | 'unsigned' | 'failed' | 'unchecked'.
    keys_tried: ids of the live keys the signature was checked against (never values).
    """

    request_id: str
    tenant: str
    received_at: float
    outcome: str = "ok"
    ret: int = 0
    status: int = 200
    key_id: str | None = None
    signature: str = "unchecked"
    signature_reason: str | None = None
    keys_tried: tuple[str, ...] = ()
    skew_seconds: float | None = None
    first_level_id: str | None = None
    second_level_id: str | None = None
    query: str | None = None
    results: int = 0
    latency_ms: float = 0.0
    search_ms: float | None = None
    extra: dict[str, object] = field(default_factory=dict)


async def read_body(receive, max_bytes: int, timeout: float | None = None) -> bytes:  # type: ignore[no-untyped-def]
    """Read the raw ASGI body (gateway.bodies): PayloadTooLarge past `max_bytes` bytes,
    BodyTimeout when it is not complete within `timeout` seconds."""
    try:
        return await read_limited(asgi_chunks(receive), max_bytes, timeout)
    except BodyLimitExceeded as exc:
        if exc.kind == "too_large":
            raise PayloadTooLarge("body_too_large", exc.message) from None
        raise BodyTimeout("body_timeout", exc.message) from None


def _check_media(headers: list[tuple[bytes, bytes]], max_bytes: int) -> None:
    ctype: str | None = None
    encoding: str | None = None
    for name, value in headers:
        if name == b"content-encoding":
            encoding = value.decode("latin-1")
        elif name == b"content-type":
            ctype = value.decode("latin-1")
        elif name == b"content-length":
            v = value.decode("latin-1").strip()
            if v.isdigit() and int(v) > max_bytes:
                raise PayloadTooLarge("body_too_large", f"body exceeds {max_bytes} bytes")
    problem = json_media_problem(ctype, encoding)
    if problem is not None:
        kind, message = problem
        reason = "content_encoding_unsupported" if kind == "encoding" else "content_type_unsupported"
        raise UnsupportedMedia(reason, message)


def request_id(raw_headers: list[tuple[bytes, bytes]]) -> str:
    """The caller's X-Request-Id when it matches [A-Za-z0-9._:-]{1,64} (first one wins),
    else 16 fresh hex characters. Echoed in the response's x-request-id and every log line."""
    for name, value in raw_headers:
        if name == b"x-request-id":
            v = value.decode("latin-1")
            if _REQUEST_ID.fullmatch(v):
                return v
            break
    return uuid.uuid4().hex[:16]


async def handle(rt: Runtime, tenant: Tenant, scope, receive, send) -> None:  # type: ignore[no-untyped-def]
    """ASGI handler of one tenant's callback path (see module docstring)."""
    started = time.perf_counter()
    d = Delivery(request_id=request_id(scope["headers"]), tenant=tenant.name, received_at=rt.clock.now())
    try:
        body = await _answer(rt, tenant, scope, receive, d)
    except CallbackError as err:
        d.outcome, d.ret, d.status = err.code, err.ret, err.status
        body = error_body(err)
    except Exception:  # a bug: answer with the envelope, log the trace, never leak it
        log.exception("internal error", extra={"request_id": d.request_id, "tenant": tenant.name})
        err = CallbackError("internal", "internal error")
        d.outcome, d.ret, d.status = err.code, err.ret, err.status
        body = error_body(err)
    d.latency_ms = (time.perf_counter() - started) * 1000.0
    await send({"type": "http.response.start", "status": d.status, "headers": [
        *_RESPONSE_HEADERS, (b"content-length", str(len(body)).encode()), (b"x-request-id", d.request_id.encode()),
    ]})
    await send({"type": "http.response.body", "body": body})
    rt.record(d)


async def _answer(rt: Runtime, tenant: Tenant, scope, receive, d: Delivery) -> bytes:  # type: ignore[no-untyped-def]
    cfg = rt.config
    if scope["method"] != "POST":
        raise MethodNotAllowed("method_not_allowed")
    raw_headers = scope["headers"]
    _check_media(raw_headers, cfg.server.max_body_bytes)
    body = await read_body(receive, cfg.server.max_body_bytes, cfg.server.body_timeout_seconds)
    hdrs = signing.signing_headers(raw_headers)
    now = rt.clock.now()
    tolerance = cfg.replay.tolerance_seconds

    ts_nonce = _verify(rt, tenant, hdrs, body, now, tolerance, d)
    if ts_nonce is None:
        return _search(rt, tenant, body, d)
    ts, nonce = ts_nonce
    key = nonce_key(cfg.replay.key_prefix, tenant.name, f"{ts:010d}", nonce)
    expire_at = claim_expiry(ts, tolerance)
    # The next ASGI message after the body is http.disconnect: a caller that gave up (its own
    # timeout while Redis or the search was slow) must not find its retry refused as
    # "already answered", so its claim is released instead of marked answered.
    gone = asyncio.ensure_future(receive())
    try:
        claim = await rt.nonces.claim(key, expire_at)
        if claim.state != "claimed":
            raise _not_ours(claim.state)
        try:
            answer = _search(rt, tenant, body, d)
            if _hung_up(gone):
                raise ClientDisconnected("client_disconnected")
            state = await rt.nonces.answered(key, claim.owner, expire_at)
            if state != "recorded":
                raise _not_ours(state)
            return answer
        except BaseException:
            await rt.nonces.release(key, claim.owner)
            raise
    finally:
        gone.cancel()
        if gone.done() and not gone.cancelled():
            gone.exception()  # retrieved, so asyncio does not log it as lost


def _hung_up(gone: asyncio.Future[dict[str, object]]) -> bool:
    """True when `gone` (a pending ASGI receive after the whole body) got http.disconnect."""
    if not gone.done() or gone.cancelled() or gone.exception() is not None:
        return False
    return gone.result().get("type") == "http.disconnect"


def _not_ours(state: str) -> Replayed:
    """The 409 for a delivery another request answered ('answered') or is answering ('pending')."""
    if state == "answered":
        return Replayed("replayed", "this timestamp and nonce were already answered")
    return Replayed("delivery_pending", "an identical delivery is being answered right now; "
                    "if it fails, a retry after a few seconds is answered")


def _search(rt: Runtime, tenant: Tenant, body: bytes, d: Delivery) -> bytes:
    """Parse the verified body, resolve the scope, search, shape the success envelope."""
    cfg = rt.config
    req: CallbackRequest = parse_body(body, cfg.search)
    d.first_level_id, d.second_level_id, d.query = req.first_level_id, req.second_level_id, req.query
    eff = resolve_callback(tenant, req.first_level_id, req.second_level_id, d.key_id)
    index = rt.index(eff.index)
    t0 = time.perf_counter()
    hits = index.search(
        req.query,
        req.limit,
        filter=eff.filter,
        one_per_document=cfg.search.one_per_document,
        summary_chars=cfg.search.summary_chars,
        content_chars=cfg.search.content_chars,
    )
    d.search_ms = (time.perf_counter() - t0) * 1000.0
    d.results = len(hits)
    return success_body(hits)


def _verify(rt: Runtime, tenant: Tenant, hdrs: signing.SigningHeaders, body: bytes, now: float,
            tolerance: int, d: Delivery) -> tuple[int, str] | None:
    """Verify per the tenant's mode; return (timestamp, nonce) to claim, or None.

    enforce: every failure raises. report (seed 003 "接入流程" 3-4: the console's 测试 is
    sent before the key is shown): a missing or failing signature is recorded on `d`
    (signature 'unsigned' | 'failed', signature_reason, keys_tried, skew_seconds) and the
    request is still answered. Format checks of the headers that are present, and the
    replay claim whenever a valid timestamp and nonce are present, stay on in both modes.
    Raises MalformedRequest / VerificationFailed (enforce, or a malformed header in report).
    """
    if tenant.verify == "report" and hdrs.signature is None:
        d.signature, d.signature_reason = "unsigned", "header_missing"
        # The headers that are present are still format-checked; placeholders stand in for
        # the absent ones, and nothing is claimed without both a timestamp and a nonce.
        ts_s, nonce, _ = signing.check_formats(signing.SigningHeaders(
            hdrs.timestamp or "0" * 10, hdrs.nonce or "absent", "0" * 64))
        if hdrs.timestamp is None or hdrs.nonce is None:
            return None
        d.skew_seconds = round(now - int(ts_s), 3)
        if abs(now - int(ts_s)) > tolerance:
            return None  # outside the window a claim could not expire correctly
        return int(ts_s), nonce
    ts_s, nonce, sig = signing.check_formats(hdrs)
    d.skew_seconds = round(now - int(ts_s), 3)
    d.keys_tried = tuple(k.id for k in tenant.secrets if k.live(now))
    try:
        ts = signing.check_tolerance(ts_s, now, tolerance)
        d.key_id = signing.match_key(tenant.secrets, ts_s, nonce, sig, body, now)
        d.signature = "verified"
    except VerificationFailed as err:
        d.signature, d.signature_reason = "failed", err.code
        if tenant.verify != "report":
            raise
        if err.code == "timestamp_expired":
            return None  # outside the window a claim could not expire correctly
        ts = int(ts_s)
    return ts, nonce


__all__ = ["Delivery", "handle", "read_body", "DependencyUnavailable"]
