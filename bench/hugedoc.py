"""One huge document against a normal index: the same queries through the callback.

Rationale: docs/design-notes.md, "bench/hugedoc.py".
"""

from __future__ import annotations

import random
import statistics
import time
from typing import TYPE_CHECKING, Any

import httpx
import orjson

from bench.corpus import huge_document
from bench.wings import WINGS
from gateway.ops.processes import Server

if TYPE_CHECKING:
    from bench.workload import Stream

__all__ = ["HUGE_ID", "HUGE_ROUTE", "HUGE_TERM", "huge_queries", "huge_vs_normal"]

HUGE_ROUTE = "tidb-huge"
HUGE_ID = "huge/manual.md"
HUGE_TERM = "合订本"
"""A word only the huge document holds (its title and section headings)."""
CALLBACK = WINGS[0]


def _sequential(base: str, route: str, queries: list[str], secret: str) -> tuple[list[float], list[bytes]]:
    """Each query once through the callback on one keep-alive connection: (seconds, answers)."""
    from gateway.volcengine.signing import sign_headers

    lat: list[float] = []
    answers: list[bytes] = []
    with httpx.Client(base_url=base, timeout=30.0) as client:
        for q in queries:
            body = CALLBACK.body(route, q)
            h = {"Content-Type": "application/json", **sign_headers(secret, body, int(time.time()))}
            t0 = time.perf_counter()
            r = client.post(CALLBACK.url_path(route), content=body, headers=h)
            lat.append(time.perf_counter() - t0)
            answers.append(r.content)
    return lat, answers


def huge_vs_normal(srv: Server, secret: str, sets: dict[str, list[str]], rounds: int) -> dict[str, Any]:
    """Each query set routed without and with the huge document, interleaved by round; per
    (set, route): latency (median per query over the rounds) and server CPU per callback,
    and how many of the set's answers hold the huge document."""
    from bench.procfs import cpu_seconds

    routes = {"normal": "tidb-docs-cn", "huge": HUGE_ROUTE}
    lat: dict[tuple[str, str], list[list[float]]] = {(q, r): [] for q in sets for r in routes}
    cpu: dict[tuple[str, str], float] = dict.fromkeys(lat, 0.0)
    returned: dict[str, int] = {}
    for k in range(rounds):
        for name, queries in sets.items():
            for key in (("normal", "huge") if k % 2 == 0 else ("huge", "normal")):
                pids = [srv.proc.pid, *srv.workers()] if srv.proc else []
                c0 = sum(cpu_seconds(p) for p in pids)
                times, answers = _sequential(srv.base, routes[key], queries, secret)
                cpu[name, key] += sum(cpu_seconds(p) for p in pids) - c0
                lat[name, key].append(times)
                if key == "huge" and name not in returned:
                    # A result's Id is the document id, or "id#chunk" for a document of several chunks.
                    returned[name] = sum(any(str(item.get("Id", "")).split("#")[0] == HUGE_ID
                                             for item in orjson.loads(a).get("Result", [])) for a in answers)
    out: dict[str, Any] = {"rounds": rounds, "sets": {}}
    for name, queries in sets.items():
        row: dict[str, Any] = {"queries": len(queries), "returned": returned.get(name, 0)}
        for key in routes:
            med = sorted(statistics.median(col) for col in zip(*lat[name, key], strict=True))
            row[key] = {"p50_ms": 1000 * med[len(med) // 2],
                        "p90_ms": 1000 * med[min(len(med) - 1, int(len(med) * 0.9))],
                        "mean_ms": 1000 * statistics.fmean(med),
                        "server_cpu_ms": 1000 * cpu[name, key] / (rounds * len(queries))}
        row["p50_ratio"] = row["huge"]["p50_ms"] / row["normal"]["p50_ms"]
        row["cpu_ratio"] = row["huge"]["server_cpu_ms"] / max(1e-9, row["normal"]["server_cpu_ms"])
        out["sets"][name] = row
    return out


def huge_queries(stream: Stream, n: int, huge_chunks: int) -> dict[str, list[str]]:
    """Two sets of n/2 queries. "ordinary": TiDB questions (the real ones, then unique
    fragments); they match some of the huge document's chunks (it is made of the same
    sentences) but rarely return it. "aimed": a word of its title plus 24 characters of one
    of its sections (built again here, deterministically, from the same texts), so its chunks
    rank first and the one-per-document collapse has to get past them (the path once
    measured at 250-300 ms)."""
    half = n // 2
    ordinary = (stream.real + stream.take(max(0, half - len(stream.real))))[:half]
    sections = huge_document(huge_chunks, stream.texts).sections
    rng = random.Random(9)
    aimed = []
    for _ in range(n - half):
        text = rng.choice(sections).text
        start = rng.randrange(0, max(1, len(text) - 24))
        aimed.append(f"{HUGE_TERM} {text[start:start + 24]}")
    return {"ordinary": ordinary, "aimed": aimed}
