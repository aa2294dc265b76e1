"""`kbgate probe`: send one request exactly as the Volcengine console does, explain the answer.

The body is compact JSON with the seed 003 field names, signed over the exact bytes sent.
"""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from gateway.core.errors import RET_TABLE
from gateway.volcengine.signing import sign_headers

# What an admin should do about each failure, in plain words.
ADVICE: dict[str, str] = {
    "header_missing": "The request carried no signature. Set the tenant to verify = \"report\" until the "
    "console shows the key, or probe with --config/--secret-env.",
    "timestamp_expired": "The timestamp is too far from the gateway's clock. Check NTP on both sides.",
    "signature_mismatch": "No key of this tenant produced the signature. The key in the console and the "
    "key in the gateway's config differ (or the body was altered on the way, e.g. by a proxy).",
    "no_live_key": "Every key of this tenant has expired (not_after). Add a new key.",
    "replayed": "This timestamp and nonce were already used. Each request needs a fresh nonce.",
    "tenant_unknown": "No tenant is configured at this URL path. Check the path in the console and in the config.",
    "route_unknown": "The tenant has no route for this FirstLevelId/SecondLevelId. Add a [[tenants.X.routes]] "
    "entry with the ids exactly as typed in the console.",
    "replay_store_unavailable": "The gateway cannot reach Redis. Check replay.redis_url and the Redis server.",
    "index_unavailable": "The routed index does not exist or cannot be opened. Build it with kbgate index add.",
    "body_too_large": "The body exceeds server.max_body_bytes.",
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

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.envelope is not None and self.envelope.get("Ret") == 0

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
        lines.append(f"  Ret={env.get('Ret')} Msg={env.get('Msg')!r}")
        if self.ok:
            results = env.get("Result") or []
            lines.append(f"  OK: {len(results)} result(s)")
            for item in results:
                lines.append(f"   - [{item.get('Id')}] {item.get('Title')}: {str(item.get('Summary', ''))[:60]}")
            return "\n".join(lines)
        reason = next((r.reason for r in RET_TABLE if r.ret == env.get("Ret")), None)
        if reason:
            lines.append(f"  reason: {reason}")
            if reason in ADVICE:
                lines.append(f"  what to do: {ADVICE[reason]}")
        return "\n".join(lines)


def probe(url: str, *, secret: str | None, first: str, second: str, query: str, limit: int = 3,
          timeout: float = 10.0, timestamp: int | None = None) -> ProbeOutcome:
    """POST one callback to `url` (signed with `secret` unless None) and return the outcome.

    Never raises for network problems: they become `ProbeOutcome(status=None, problem=...)`.
    """
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


def wait_ready(base: str, proc: subprocess.Popen[bytes], seconds: float = 30.0) -> None:
    """Wait until `base`/readyz answers 200 (a `kbgate serve` we started as `proc`).

    Raises RuntimeError when the process exits first or `seconds` pass.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"kbgate serve exited with code {proc.returncode}")
        try:
            if httpx.get(f"{base}/readyz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError("kbgate serve did not become ready in time")

