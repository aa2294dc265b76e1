"""`kbgate probe`: send one request exactly as the Volcengine console does, explain the answer.

Rationale: docs/design-notes.md, "gateway/ops/probe.py".
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import orjson

from gateway.core.errors import RET_TABLE
from gateway.volcengine.signing import sign_headers
from indexes.invisible import shown


def N_(message: str) -> str:
    """Mark `message` for the console's catalogs (babel.cfg; the tenant page shows it translated)."""
    return message


# What an admin should do about each failure, in plain words.
ADVICE: dict[str, str] = {
    "header_missing": N_("The request carried no signature. Set the tenant to verify = \"report\" until the "
                         "console shows the key, or probe with --config/--secret-env."),
    "timestamp_expired": N_("The timestamp is too far from the gateway's clock. Check NTP on both sides."),
    "signature_mismatch": N_("No key of this tenant produced the signature. The key in the console and the "
                             "key in the gateway's config differ (or the body was altered on the way, e.g. by a "
                             "proxy)."),
    "no_live_key": N_("Every key of this tenant has expired (not_after). Add a new key."),
    "replayed": N_("This timestamp and nonce were already used. Each request needs a fresh nonce."),
    "tenant_unknown": N_("No tenant is configured at this URL path. Check the path in the console and in the "
                         "config."),
    "route_unknown": N_("The tenant has no route for this FirstLevelId/SecondLevelId. Add a [[tenants.X.routes]] "
                        "entry with the ids exactly as typed in the console."),
    "replay_store_unavailable": N_("The gateway cannot reach Redis. Check replay.redis_url and the Redis server."),
    "index_unavailable": N_("The routed index does not exist or cannot be opened. Build it with kbgate index add."),
    "body_too_large": N_("The body exceeds server.max_body_bytes."),
}


@dataclass
class ProbeOutcome:
    """The result of one probe: HTTP status (None when no answer), the parsed envelope, timing."""

    url: str
    status: int | None
    envelope: dict[str, Any] | None
    elapsed_ms: float
    problem: str | None = None
    sent_headers: dict[str, str] = field(default_factory=dict)
    route_state: dict[str, Any] | None = None  # the probed route's entry of /readyz's "routes"
    curl: str | None = None  # a shell line that sends the same body again

    @property
    def ok(self) -> bool:
        """Ret 0 over HTTP 200, and /readyz does not say the route is broken (when it said anything)."""
        answered = self.status == 200 and self.envelope is not None and self.envelope.get("Ret") == 0
        return answered and (self.route_state is None or self.route_state.get("state") == "ok")

    def _readiness_lines(self) -> list[str]:
        s = self.route_state
        if s is None or s.get("state") == "ok":
            return []
        what = {"stale": "answered from the copy a worker opened before; a restarted worker cannot serve it",
                "unavailable": "its callers get Ret 50302 index_unavailable"}.get(str(s.get("state")), "")
        return [f"  /readyz: route {s.get('route')}: index {s.get('index')} {s.get('state')} "
                f"({s.get('problem')}): {what}",
                "  what to do: rebuild it with `kbgate index add`, then check `kbgate check-config`"]

    def _tail(self) -> list[str]:
        return self._readiness_lines() + ([f"  send it again yourself:\n    {self.curl}"] if self.curl else [])

    def explain(self) -> str:
        """A plain-words account: what was answered, and what to do about a failure."""
        lines = [f"POST {self.url}"]
        if self.status is None:
            lines.append(f"  no answer: {self.problem}")
            return "\n".join(lines)
        lines.append(f"  HTTP {self.status} in {self.elapsed_ms:.0f} ms")
        env = self.envelope
        if env is None:
            lines.append(f"  the answer is not the Ret/Msg/Result envelope: {self.problem}")
            lines.append("  Is this URL the gateway's callback path (default /volcengine/<tenant>)?")
            return "\n".join(lines)
        msg = env.get("Msg")
        said = f"'{shown(msg)}'" if isinstance(msg, str) else shown(repr(msg))
        lines.append(f"  Ret={shown(str(env.get('Ret')))} Msg={said}")
        if self.ok:
            results = env.get("Result") or []
            lines.append(f"  OK: {len(results)} result(s)")
            for item in results:
                # what the answer holds is shown, never run: an ESC or OSC would reach the terminal
                lines.append(f"   - [{shown(str(item.get('Id')))}] {shown(str(item.get('Title')))}: "
                             f"{shown(str(item.get('Summary', ''))[:60])}")
            return "\n".join(lines + self._tail())
        if self.status == 200 and env.get("Ret") == 0:
            lines.append(f"  answered, but NOT OK: {len(env.get('Result') or [])} result(s)")
            return "\n".join(lines + self._tail())
        reason = next((r.reason for r in RET_TABLE if r.ret == env.get("Ret")), None)
        if reason:
            lines.append(f"  reason: {reason}")
            if reason in ADVICE:
                lines.append(f"  what to do: {ADVICE[reason]}")
        return "\n".join(lines + self._tail())


def curl_line(url: str, headers: dict[str, str], *, body: bytes | None = None, body_file: str | None = None) -> str:
    """A shell-quoted curl command POSTing `body` (or the bytes of `body_file`, read by curl)
    with `headers` to `url`. `--data-binary`, never `-d`: `-d @FILE` strips newlines and
    carriage returns, so the bytes sent would differ from the bytes signed (Ret 40105)."""
    data = f"@{body_file}" if body_file is not None else (body or b"").decode("utf-8")
    parts = ["curl", "-sS", "-X", "POST", "--data-binary", data]
    for k, v in headers.items():
        parts += ["-H", f"{k}: {v}"]
    return " ".join(shlex.quote(p) for p in [*parts, url])


def route_readiness(url: str, tenant: str, first: str, second: str, timeout: float) -> dict[str, Any] | None:
    """The entry of tenant route FIRST/SECOND in /readyz's "routes" of the gateway serving the
    callback `url` (same scheme and host, path /readyz), or None when that does not answer a
    kbgate /readyz body naming the route. Never raises."""
    parts = urlsplit(url)
    ready = urlunsplit((parts.scheme, parts.netloc, "/readyz", "", ""))
    try:
        body = httpx.get(ready, timeout=timeout).json()
        routes = body.get("routes") if isinstance(body, dict) else None
    except (httpx.HTTPError, ValueError):
        return None
    name = f"{tenant} {first}/{second}"
    for r in routes if isinstance(routes, list) else []:
        if isinstance(r, dict) and r.get("kind") == "tenant" and r.get("route") == name:
            return r
    return None


def probe(url: str, *, secret: str | None, first: str, second: str, query: str, limit: int = 3,
          timeout: float = 10.0, timestamp: int | None = None, tenant: str | None = None) -> ProbeOutcome:
    """POST one callback to `url` (signed with `secret` unless None) and return the outcome;
    with `tenant`, also the probed route's state from the gateway's /readyz (`route_readiness`).
    The outcome's `curl` sends the same body again, signed with a fresh nonce.

    Never raises for network problems: they become `ProbeOutcome(status=None, problem=...)`.
    """
    outcome = _send(url, secret, first, second, query, limit, timeout, timestamp)
    if outcome.status is None:
        return outcome
    if tenant is not None:
        outcome.route_state = route_readiness(url, tenant, first, second, timeout)
    body = orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": limit})
    again = {"Content-Type": "application/json"} if secret is None else sign_headers(secret, body, int(time.time()))
    outcome.curl = curl_line(url, again, body=body)
    return outcome


def _send(url: str, secret: str | None, first: str, second: str, query: str, limit: int, timeout: float,
          timestamp: int | None) -> ProbeOutcome:
    body = orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": limit})
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers = sign_headers(secret, body, timestamp if timestamp is not None else int(time.time()))
    started = time.perf_counter()
    try:
        r = httpx.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.ConnectError:
        return ProbeOutcome(url, None, None, 0.0, "connection refused: is `kbgate serve` running at this address?")
    except httpx.TimeoutException:
        return ProbeOutcome(url, None, None, timeout * 1000, f"no answer within {timeout} s")
    except httpx.HTTPError as exc:
        return ProbeOutcome(url, None, None, 0.0, f"{type(exc).__name__}: {exc}")
    elapsed = (time.perf_counter() - started) * 1000
    try:
        env = orjson.loads(r.content)
        if not isinstance(env, dict) or "Ret" not in env:
            raise ValueError("no Ret field")
    except (orjson.JSONDecodeError, ValueError) as exc:
        return ProbeOutcome(url, r.status_code, None, elapsed, str(exc), headers)
    return ProbeOutcome(url, r.status_code, env, elapsed, None, headers)
