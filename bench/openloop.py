"""An open-loop HTTP/1.1 load generator: `python -m bench.openloop ...`, in its own process.

Rationale: docs/design-notes.md, "bench/openloop.py".
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import resource
import secrets
import string
import sys
import time
from collections import Counter
from pathlib import Path

__all__ = ["RequestBuilder", "main"]


def _pct(values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 when empty)."""
    if not values:
        return 0.0
    k = max(0, min(len(values) - 1, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k]


class RequestBuilder:
    """Raw HTTP/1.1 POST requests from body lines, each freshly signed.

    mode 'hmac': the 联网问答Agent callback spec signing with `secret` (nonce = per-run random prefix + counter,
    letters and digits, ≤ 32); mode 'bearer': `Authorization: Bearer <secret>`.
    Raises ValueError for another mode or no bodies."""

    def __init__(self, host: str, path: str, mode: str, secret: str, bodies: list[bytes],
                 headers: tuple[tuple[str, str], ...] = ()) -> None:
        if mode not in ("hmac", "bearer"):
            raise ValueError(f"mode must be hmac or bearer, not {mode!r}")
        if not bodies:
            raise ValueError("no request bodies")
        self.mode, self.bodies, self.sent = mode, bodies, 0
        self._key = secret.encode()
        self._prefix = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(10))
        head = f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
        if mode == "bearer":
            head += f"Authorization: Bearer {secret}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers)
        self._head = head.encode()

    @property
    def wrapped(self) -> int:
        """Requests built past the end of the bodies (their bodies repeat earlier ones)."""
        return max(0, self.sent - len(self.bodies))

    def next(self) -> bytes:
        body = self.bodies[self.sent % len(self.bodies)]
        self.sent += 1
        parts = [self._head, b"Content-Length: ", str(len(body)).encode(), b"\r\n"]
        if self.mode == "hmac":
            ts = str(int(time.time())).encode()
            nonce = f"{self._prefix}{self.sent:x}".encode()
            sig = hmac.new(self._key, ts + nonce + body, hashlib.sha256).hexdigest().encode()
            parts += [b"X-Content-Timestamp: ", ts, b"\r\nX-Content-Nonce: ", nonce,
                      b"\r\nX-Content-Signature: ", sig, b"\r\n"]
        parts += [b"\r\n", body]
        return b"".join(parts)


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """(status, server asked to close) of one response with a Content-Length body."""
    head = await reader.readuntil(b"\r\n\r\n")
    lower = head.lower()
    i = lower.find(b"content-length:")
    if i < 0:
        raise ValueError("response without content-length")
    await reader.readexactly(int(lower[i + 15 : lower.index(b"\r\n", i)]))
    return int(head[9:12]), b"connection: close" in lower


async def _run(args: argparse.Namespace) -> dict[str, object]:
    secret = Path(args.secret_file).read_text(encoding="utf-8").strip()
    bodies = [ln for ln in Path(args.bodies).read_bytes().split(b"\n") if ln]
    extra = tuple((k.strip(), v.strip()) for k, _, v in (h.partition(":") for h in args.header))
    builder = RequestBuilder(f"{args.host}:{args.port}", args.path, args.mode, secret, bodies, extra)
    pc = time.perf_counter
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    slots = asyncio.Semaphore(args.max_connections)
    lat: list[float] = []
    service: list[float] = []
    lag: list[float] = []
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    opened = 0

    async def one(intended: float, measured: bool) -> None:
        nonlocal opened
        began = pc()  # the generator's own delay: began - intended (waiting for a slot comes after)
        async with slots:
            if idle:
                reader, writer = idle.pop()
            else:
                try:
                    reader, writer = await asyncio.open_connection(args.host, args.port)
                except OSError as exc:
                    if measured:
                        errors.append(f"connect: {exc}")
                    return
                opened += 1
            request = builder.next()
            sent = pc()
            try:
                writer.write(request)
                status, close = await _read_response(reader)
            except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                writer.close()
                if measured:
                    errors.append(f"{type(exc).__name__}: {exc}")
                return
            done = pc()
            if close:
                writer.close()
            else:
                idle.append((reader, writer))
        if measured:
            lat.append(done - intended)
            service.append(done - sent)
            lag.append(began - intended)
            statuses[status] += 1

    rate = float(args.rate)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)  # from here: the load's CPU, not start-up and file reading
    warm_n = int(args.warmup * rate)
    total = warm_n + int(args.seconds * rate)
    tasks: set[asyncio.Task[None]] = set()
    t0 = pc() + 0.01
    i = 0
    while i < total:
        due = t0 + i / rate
        now = pc()
        if due > now:
            await asyncio.sleep(due - now)
            continue
        while i < total and t0 + i / rate <= now:  # catch up on everything due by now
            task = asyncio.create_task(one(t0 + i / rate, i >= warm_n))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            i += 1
    schedule_end = pc()
    unanswered = 0
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=args.timeout)
        unanswered = len(pending)
        for t in pending:
            t.cancel()
    for _, writer in idle:
        writer.close()
    window = max(1e-9, schedule_end - (t0 + warm_n / rate))
    lat.sort()
    service.sort()
    lag.sort()
    ok = sum(n for s, n in statuses.items() if 200 <= s < 300)
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "tool": "bench.openloop",
        "offered_rps": rate,
        "achieved_rps": ok / window,
        "scheduled": total - warm_n,
        "requests": len(lat),
        "ok": ok,
        "non_2xx": len(lat) - ok,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": len(errors) + unanswered,
        "unanswered": unanswered,
        "first_error": errors[0] if errors else None,
        "seconds": window,
        "p50_ms": _pct(lat, 50) * 1000,
        "p99_ms": _pct(lat, 99) * 1000,
        "p999_ms": _pct(lat, 99.9) * 1000,
        "max_ms": (lat[-1] if lat else 0.0) * 1000,
        "service_p50_ms": _pct(service, 50) * 1000,
        "service_p99_ms": _pct(service, 99) * 1000,
        "lag_p99_ms": _pct(lag, 99) * 1000,
        "lag_max_ms": (lag[-1] if lag else 0.0) * 1000,
        "connections_opened": opened,
        "sent": builder.sent,
        "wrapped": builder.wrapped,
        "cpu_s": (ru.ru_utime + ru.ru_stime) - (ru0.ru_utime + ru0.ru_stime),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.openloop")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--mode", choices=("hmac", "bearer"), default="hmac")
    p.add_argument("--bodies", required=True, help="file of request bodies, one JSON document per line")
    p.add_argument("--secret-file", required=True, help="HMAC key (hmac) or Bearer token (bearer)")
    p.add_argument("--rate", type=float, required=True, help="offered requests per second")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds at the same rate first")
    p.add_argument("--header", action="append", default=[], help="extra request header 'Name: value'; repeatable")
    p.add_argument("--max-connections", type=int, default=512)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for answers after the schedule")
    args = p.parse_args(argv)
    if args.rate <= 0:
        p.error("--rate must be positive")
    try:
        import uvloop

        result = uvloop.run(_run(args))
    except ImportError:
        result = asyncio.run(_run(args))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
