"""A closed-loop HTTP/1.1 load generator: `python -m bench.loadgen ...`, its own process.

`--connections` keep-alive connections each send one request, read the whole response,
and send the next, for `--warmup` + `--seconds`; only requests started after the warm-up
count. Every request is a Volcengine callback signed with a fresh nonce (a per-run random
prefix plus a counter) and the current timestamp: HMAC-SHA256(secret, ts + nonce + body)
per seed 003. The floor is measured with the very same requests, so the generator's own
cost (signing, parsing) is identical on both sides of the ratio.

Prints one JSON object: requests, ok (2xx), statuses, errors, seconds, rps, p50_ms,
p99_ms, p999_ms, max_ms, connections_opened, cpu_s (this process's user+system CPU seconds, to show how much
of the 2 cores the generator itself took).
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

import orjson

from bench.corpus import queries

__all__ = ["main"]


class Signer:
    """Builds signed request bytes: fresh nonce per request, timestamp cached per second."""

    def __init__(self, host: str, path: str, secret: str, first: str, second: str, limit: int) -> None:
        self._key = secret.encode()
        alphabet = string.ascii_letters + string.digits
        self._prefix = "".join(secrets.choice(alphabet) for _ in range(10))
        self._n = 0
        self._bodies = [orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": q,
                                      "Limit": limit}) for q in queries()]
        self._head = (f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n").encode()
        self._ts_second = -1
        self._ts = b""

    def next(self) -> bytes:
        now = int(time.time())
        if now != self._ts_second:
            self._ts_second, self._ts = now, str(now).encode()
        self._n += 1
        nonce = f"{self._prefix}{self._n:x}".encode()
        body = self._bodies[self._n % len(self._bodies)]
        sig = hmac.new(self._key, self._ts + nonce + body, hashlib.sha256).hexdigest().encode()
        return b"".join((self._head, b"Content-Length: ", str(len(body)).encode(),
                         b"\r\nX-Content-Timestamp: ", self._ts, b"\r\nX-Content-Nonce: ", nonce,
                         b"\r\nX-Content-Signature: ", sig, b"\r\n\r\n", body))


async def _connection(host: str, port: int, signer: Signer, measure_from: float, stop: float,
                      lat: list[int], statuses: Counter[int], errors: list[str]) -> int:
    """One client connection's loop; reconnects when the server closes (hypercorn closes a
    keep-alive connection after `keep_alive_max_requests`, as a browser or wrk would see).
    Returns the number of connections opened."""
    pc = time.perf_counter
    opened = 0
    while pc() < stop:
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError as exc:
            errors.append(f"connect: {exc}")
            await asyncio.sleep(0.05)
            continue
        opened += 1
        try:
            while True:
                request = signer.next()
                t0 = pc()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                lower = head.lower()
                i = lower.find(b"content-length:")
                if i < 0:
                    raise ValueError("response without content-length")
                n = int(lower[i + 15 : lower.index(b"\r\n", i)])
                await reader.readexactly(n)
                t1 = pc()
                if t0 >= measure_from:
                    lat.append(int((t1 - t0) * 1e9))
                    statuses[int(head[9:12])] += 1
                if t1 >= stop:
                    return opened
                if b"connection: close" in lower:
                    break
        except asyncio.IncompleteReadError as exc:
            if exc.partial:  # closed in the middle of a response: an error; between: a reconnect
                errors.append(f"IncompleteReadError after {len(exc.partial)} bytes")
        except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            writer.close()
    return opened


def _pct(values: list[int], p: float) -> float:
    if not values:
        return 0.0
    k = max(0, min(len(values) - 1, int(round(p / 100.0 * len(values) + 0.5)) - 1))
    return values[k] / 1e6


async def _run(args: argparse.Namespace) -> dict[str, object]:
    secret = open(args.secret_file, encoding="utf-8").read().strip()
    signer = Signer(f"{args.host}:{args.port}", args.path, secret, args.first, args.second, args.limit)
    lat: list[int] = []
    statuses: Counter[int] = Counter()
    errors: list[str] = []
    start = time.perf_counter()
    measure_from = start + args.warmup
    stop = measure_from + args.seconds
    opened = await asyncio.gather(*(_connection(args.host, args.port, signer, measure_from, stop, lat,
                                                statuses, errors) for _ in range(args.connections)))
    wall = max(1e-9, min(time.perf_counter(), stop + 5) - measure_from)
    lat.sort()
    ru = resource.getrusage(resource.RUSAGE_SELF)
    ok = sum(n for s, n in statuses.items() if 200 <= s < 300)
    return {
        "connections": args.connections,
        "requests": len(lat),
        "ok": ok,
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "errors": len(errors),
        "connections_opened": sum(opened),
        "first_error": errors[0] if errors else None,
        "seconds": wall,
        "rps": ok / wall,
        "p50_ms": _pct(lat, 50),
        "p99_ms": _pct(lat, 99),
        "p999_ms": _pct(lat, 99.9),
        "max_ms": lat[-1] / 1e6 if lat else 0.0,
        "cpu_s": ru.ru_utime + ru.ru_stime,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.loadgen")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", required=True)
    p.add_argument("--secret-file", required=True)
    p.add_argument("--first", default="bench")
    p.add_argument("--second", default="bench")
    p.add_argument("--limit", type=int, default=5)
    p.add_argument("--connections", type=int, default=8)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=1.0)
    args = p.parse_args(argv)
    try:
        import uvloop

        result = uvloop.run(_run(args))
    except ImportError:
        result = asyncio.run(_run(args))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
