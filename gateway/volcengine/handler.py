"""The Volcengine knowledge callback (the 联网问答Agent callback spec): one straight path per request, as an ASGI app.

Rationale: docs/design-notes.md, "gateway/volcengine/handler.py".
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from dataclasses import fields, replace

from starlette.types import Message, Receive, Scope, Send

from gateway.core import retrieve
from gateway.core.bodies import asgi_chunks, json_media_problem, read_limited
from gateway.core.config import Config, Tenant, floor_of
from gateway.core.errors import (
    BodyTimeout,
    CallbackError,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    UnsupportedMedia,
)
from gateway.core.events import Asker, Delivery
from gateway.core.replay import answer_once, claim_expiry, nonce_key
from gateway.core.runtime import Runtime
from gateway.core.scope import resolve_callback
from gateway.core.validate import Problem
from gateway.volcengine.keyuse import KeyUsage, make_key_usage
from gateway.volcengine.signing import Verdict, signing_headers, verify
from gateway.volcengine.wire import error_body, parse_body, success_body
from indexes.types import NO_DIALS

log = logging.getLogger("kbgate.callback")
access_log = logging.getLogger("kbgate.access")

CALLBACK_PREFIX = "/volcengine/"
# A caller's X-Request-Id is echoed and logged when it is a plain token; anything else
# (too long, spaces, non-ASCII) is replaced so logs cannot be forged or bloated through it.
_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}")
_RESPONSE_HEADERS = [(b"content-type", b"application/json; charset=utf-8"), (b"cache-control", b"no-store")]
# What one callback's log line carries: every Delivery field but the query text and extras.
_LOGGED_FIELDS = tuple(f.name for f in fields(Delivery) if f.name not in ("query", "extra"))

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


def _body_problem(p: Problem) -> CallbackError:
    if p.kind == "too_large":
        return PayloadTooLarge("body_too_large", p.message)
    if p.kind == "timeout":
        return BodyTimeout("body_timeout", p.message)
    reason = "content_encoding_unsupported" if p.key == "Content-Encoding" else "content_type_unsupported"
    return UnsupportedMedia(reason, p.message)


def _check_media(headers: list[tuple[bytes, bytes]], max_bytes: int) -> None:
    """Content-Type, Content-Encoding and a declared Content-Length, before any body is read."""
    ctype = encoding = None
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
        raise _body_problem(problem)


def log_delivery(d: Delivery) -> None:
    """The one JSON log line of a callback (query text only at debug level, as its own line)."""
    extra = {name: getattr(d, name) for name in _LOGGED_FIELDS}  # asdict() deep-copies: 10x slower
    access_log.log(logging.INFO if d.status < 500 else logging.ERROR, "callback", extra=extra)
    if d.query is not None and access_log.isEnabledFor(logging.DEBUG):
        access_log.debug("callback query", extra={"request_id": d.request_id, "query": d.query})


class VolcengineWing:
    """Every tenant callback path of the current config, as one ASGI app.

    rt: the worker's Runtime. key_usage: where verified keys are counted (made from the
    config when None). Subscribes its observers (log line, key usage) to `rt.events`.
    """

    def __init__(self, rt: Runtime, key_usage: KeyUsage | None = None) -> None:
        self.rt = rt
        replay = rt.config.replay
        self.key_usage = key_usage or make_key_usage(replay.redis_url, replay.key_prefix, replay.timeout_seconds)
        rt.events.subscribe(Delivery, log_delivery)
        rt.events.subscribe(Delivery, self._note_key)
        rt.on_close(self.key_usage.close)

    def serves(self, path: str) -> bool:
        """True for a configured tenant path and for anything else under /volcengine/ (a 404 envelope)."""
        return path.startswith(CALLBACK_PREFIX) or self.rt.config.tenant_at(path) is not None

    def _note_key(self, d: Delivery) -> None:
        if d.signature == "verified" and d.key_id is not None and d.outcome not in ("replayed", "delivery_pending"):
            self.key_usage.note(d.tenant, d.key_id, d.received_at)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        rt = self.rt
        started = time.perf_counter()
        tenant = rt.config.tenant_at(scope["path"])
        d = Delivery(request_id=request_id(scope["headers"]), tenant=tenant.name if tenant else "",
                     received_at=rt.clock.now())
        try:
            if tenant is None:
                raise NotFound("tenant_unknown", "no tenant is configured at this path")
            body = await self._answer(tenant, scope, receive, d)
        except CallbackError as err:
            d.outcome, d.ret, d.status = err.code, err.ret, err.status
            body = error_body(err)
        except Exception:  # a bug: answer with the envelope, log the trace, never leak it
            log.exception("internal error", extra={"request_id": d.request_id, "tenant": d.tenant})
            bug = CallbackError("internal", "internal error")
            d.outcome, d.ret, d.status = bug.code, bug.ret, bug.status
            body = error_body(bug)
        d.latency_ms = (time.perf_counter() - started) * 1000.0
        headers = [*_RESPONSE_HEADERS, (b"content-length", str(len(body)).encode())]
        if d.status == 405:
            headers.append((b"allow", b"POST"))  # RFC 9110 §15.5.6: a 405 names the allowed methods
        if tenant is not None:
            headers.append((b"x-request-id", d.request_id.encode()))
        await send({"type": "http.response.start", "status": d.status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        if tenant is not None:  # an unknown path is nobody's delivery
            rt.events.publish(d)

    async def _answer(self, tenant: Tenant, scope: Scope, receive: Receive, d: Delivery) -> bytes:
        rt = self.rt
        cfg = rt.config  # read once: a reload mid-request changes nothing here
        if scope["method"] != "POST":
            raise MethodNotAllowed("method_not_allowed")
        _check_media(scope["headers"], cfg.server.max_body_bytes)
        body = await read_limited(asgi_chunks(receive), cfg.server.max_body_bytes, cfg.server.body_timeout_seconds,
                                  _body_problem)
        verdict = verify(tenant, signing_headers(scope["headers"]), body, rt.clock.now(), cfg.replay.tolerance_seconds)
        _record(d, verdict)
        if verdict.refusal is not None:
            raise verdict.refusal
        if verdict.claim is None:
            return await self._search(cfg, tenant, body, d)
        ts, nonce = verdict.claim
        key = nonce_key(cfg.replay.key_prefix, tenant.name, ts, nonce)
        # The next ASGI message after the body is http.disconnect: a caller that gave up (its own
        # timeout while Redis or the search was slow) must not find its retry refused as
        # "already answered", so its claim is released instead of marked answered.
        gone = asyncio.ensure_future(receive())
        try:
            return await answer_once(rt.nonces, key, claim_expiry(int(ts), cfg.replay.tolerance_seconds),
                                     lambda: self._search(cfg, tenant, body, d), lambda: _hung_up(gone))
        finally:
            gone.cancel()
            if gone.done() and not gone.cancelled():
                gone.exception()  # retrieved, so asyncio does not log it as lost

    async def _search(self, cfg: Config, tenant: Tenant, body: bytes, d: Delivery) -> bytes:
        return await answer(self.rt, cfg, tenant, body, d, asker=Asker("volcengine", tenant.name, (), "callback"))


async def answer(rt: Runtime, cfg: Config, tenant: Tenant, body: bytes, d: Delivery,
                 asker: Asker | None = None) -> bytes:
    """Parse the verified body, resolve the scope, search (off the event loop when the index
    may wait: `retrieve.search`), shape the success envelope; `d` gets the request's fields.
    Every callback and an admin's try (gateway.console.try_) answer through here; a try passes
    no asker (its search is no caller's question: `gateway.core.events.SearchAnswered`).
    Raises CallbackError (its envelope is `wire.error_body`)."""
    req = parse_body(body, cfg.search)
    d.first_level_id, d.second_level_id, d.query = req.first_level_id, req.second_level_id, req.query
    eff = resolve_callback(tenant, req.first_level_id, req.second_level_id, d.key_id)
    route = tenant.route(req.first_level_id, req.second_level_id)  # resolve_callback found it
    floor = floor_of(route.relevance_floor if route is not None else None, cfg.search)
    if asker is not None:  # the route asked, named as the gap report lists routes
        asker = replace(asker, routes=(f"{tenant.name}/{req.first_level_id}/{req.second_level_id}",))
    found = await retrieve.search(rt, eff, req.query, req.limit, summary_chars=cfg.search.summary_chars,
                                  content_chars=cfg.search.content_chars,
                                  one_per_document=cfg.search.one_per_document, floor=floor, asker=asker,
                                  dials=route.dials if route is not None else NO_DIALS)
    d.search_ms, d.results = found.took_ms, len(found.hits)
    return success_body(found.hits)


def _hung_up(gone: asyncio.Future[Message]) -> bool:
    """True when `gone` (a pending ASGI receive after the whole body) got http.disconnect."""
    if not gone.done() or gone.cancelled() or gone.exception() is not None:
        return False
    return gone.result().get("type") == "http.disconnect"


def _record(d: Delivery, v: Verdict) -> None:
    d.signature, d.signature_reason, d.key_id = v.signature, v.reason, v.key_id
    d.keys_tried, d.skew_seconds = v.keys_tried, v.skew_seconds
