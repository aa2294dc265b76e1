"""The hybrid path beside the lexical one, in the same run: what hybrid costs over its parts.

Rationale: docs/design-notes.md, "bench/hybrid.py".
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client.parser import text_string_to_metric_families

from bench.measure import closed_loop, open_loop
from bench.phases import run_phase
from bench.versus import medians
from bench.wings import WINGS
from bench.workload import Stream, write_bodies
from gateway.ops.processes import Server

__all__ = ["EMBEDDED_MODEL", "GUARD_MS", "HYBRID_ROUTE", "OPEN_P99_MS", "build_hybrid", "lexical_beside_hybrid",
           "hybrid_share", "need", "outcomes", "wait_until_hybrid"]

HYBRID_ROUTE = "tidb-docs-cn-hybrid"
LEXICAL_ROUTE = "tidb-docs-cn"
EMBEDDED_MODEL = "use-multilingual-v3"
GUARD_MS = 0.5
"""Hybrid's server CPU per cold callback ≤ lexical's + the query embedding's + this."""
OPEN_P99_MS = 15.0
EMBED_MS = 3.03 / 1.5
"""The query embedding alone, CPU ms per question: 1.5× cheaper than the 3.03 ms measured when it was set."""
OPEN_FRACTION = 0.5
EMBED_QUESTIONS = 2_000
"""At most this many of the hybrid rounds' questions are embedded in process (~3 ms each)."""
CALLBACK = WINGS[0]


def _say(msg: str) -> None:
    import sys

    print(f"bench: {msg}", file=sys.stderr, flush=True)


def need(args: argparse.Namespace) -> int:
    """Unique TiDB questions this phase takes from the stream (sizes the stream)."""
    if args.hybrid == "none":
        return 0
    per_round = int(args.max_rps * (args.versus_seconds + args.warmup))
    return args.versus_rounds * per_round + 2 * int(args.max_rps * OPEN_FRACTION * (args.seconds + args.warmup) + 10)


def build_hybrid(args: argparse.Namespace, idx_dir: Path, cache_dir: Path, extra: list[str]) -> dict[str, Any]:
    """The TiDB tree built hybrid with `args.hybrid` (its own process; embeddings cached in
    `cache_dir`, kept between runs: only the first run pays the model)."""
    _say(f"{LEXICAL_ROUTE}: building it hybrid ({args.hybrid}; embedding cache {cache_dir})")
    return run_phase(["index", "--dir", str(idx_dir), "--index", HYBRID_ROUTE, "--corpus", LEXICAL_ROUTE,
                      "--dense", args.hybrid, "--cache-dir", str(cache_dir), *extra])


def outcomes(srv: Server, index: str = HYBRID_ROUTE) -> dict[str, float]:
    """{outcome: searches} of hybrid index `index` so far, all workers together (/metrics)."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(httpx.get(f"{srv.base}/metrics", timeout=10.0).text):
        for s in fam.samples:
            if s.name == "kbgate_hybrid_searches_total" and s.labels.get("index") == index:
                out[s.labels["outcome"]] = out.get(s.labels["outcome"], 0.0) + s.value
    return out


def hybrid_share(before: dict[str, float], after: dict[str, float]) -> tuple[float | None, dict[str, int]]:
    """(share of the searches between two `outcomes` readings answered hybrid or None when
    none, {outcome: searches} of them)."""
    delta = {k: int(after.get(k, 0) - before.get(k, 0)) for k in set(after) | set(before)}
    total = sum(delta.values())
    return (delta.get("hybrid", 0) / total if total else None), {k: v for k, v in delta.items() if v}


def wait_until_hybrid(srv: Server, secret: str, queries: list[str], timeout: float = 180.0, *,
                      index: str = HYBRID_ROUTE, route: str = HYBRID_ROUTE) -> None:
    """Send callbacks to the hybrid route until a batch of them is answered hybrid by every
    worker's search (each worker loads the model in the background and answers lexically
    meanwhile). Raises RuntimeError after `timeout` seconds."""
    import time

    from gateway.volcengine.signing import sign_headers

    deadline = time.monotonic() + timeout
    i = 0
    while time.monotonic() < deadline:
        before = outcomes(srv, index)
        for _ in range(20):
            body = CALLBACK.body(route, queries[i % len(queries)])
            i += 1
            headers = {"Content-Type": "application/json", **sign_headers(secret, body, int(time.time()))}
            httpx.post(srv.base + CALLBACK.url_path(route), content=body, headers=headers, timeout=30.0)
        share, _ = hybrid_share(before, outcomes(srv, index))
        if share == 1.0:
            return
        time.sleep(0.5)
    raise RuntimeError(f"the hybrid index did not answer hybrid within {timeout:g} s (is the model loading?)")


def _bodies(work: Path, tag: str, route: str, queries: list[str]) -> Path:
    path = work / f"bodies-{tag}.txt"
    write_bodies(path, (CALLBACK.body(route, q) for q in queries))
    return path


def _run(srv: Server, route: str, bodies: Path, warm: Path, secret_file: Path, args: argparse.Namespace,
         redis_pid: int | None) -> dict[str, Any]:
    before = outcomes(srv) if route == HYBRID_ROUTE else {}
    r = closed_loop(srv, CALLBACK.url_path(route), bodies, secret_file, mode="hmac",
                    connections=args.hybrid_connections, seconds=args.versus_seconds, redis_pid=redis_pid,
                    warmup_bodies=warm, warmup=min(args.warmup, 0.5))
    if route == HYBRID_ROUTE:
        r["hybrid_share"], r["outcomes"] = hybrid_share(before, outcomes(srv))
    return r


def lexical_beside_hybrid(args: argparse.Namespace, work: Path, srv: Server, stream: Stream, secret_file: Path,
                          redis_pid: int | None) -> dict[str, Any]:
    """The phase of the module docstring, on a running server whose answer cache is off.
    Returns {'lexical': medians, 'hybrid': medians (+ hybrid_share), 'rounds': {path: rows},
    'embedding': the in-process figures, 'guard_ms', 'open': {path: open-loop row}}."""
    n = int(args.max_rps * (args.versus_seconds + min(args.warmup, 0.5)))
    rounds: dict[str, list[dict[str, Any]]] = {"lexical": [], "hybrid": []}
    sent: list[str] = []
    for r in range(args.versus_rounds):
        qs, warm = stream.take(n), stream.take(int(args.max_rps * min(args.warmup, 0.5)) + 1)
        paths = [("lexical", LEXICAL_ROUTE), ("hybrid", HYBRID_ROUTE)]
        for name, route in paths[r % 2:] + paths[:r % 2]:
            _say(f"lexical beside hybrid, round {r + 1}/{args.versus_rounds}: {name}, {args.versus_seconds:g} s")
            row = _run(srv, route, _bodies(work, f"{name}-{r}", route, qs),
                       _bodies(work, f"{name}-{r}-warm", route, warm), secret_file, args, redis_pid)
            row["round"] = r + 1
            rounds[name].append(row)
            if name == "hybrid":
                sent += qs[: row["requests"]]
    out: dict[str, Any] = {"rounds": rounds, "lexical": medians(rounds["lexical"]), "hybrid": medians(rounds["hybrid"])}
    shares = [x["hybrid_share"] for x in rounds["hybrid"] if x.get("hybrid_share") is not None]
    out["hybrid"]["hybrid_share"] = min(shares) if shares else None
    questions = work / "hybrid-questions.jsonl"
    questions.write_bytes(b"".join(orjson.dumps(q) + b"\n" for q in sent[:EMBED_QUESTIONS]))
    _say(f"the query embedding alone, in process, on {min(len(sent), EMBED_QUESTIONS):,} of those questions")
    out["embedding"] = run_phase(["embed", "--model", args.hybrid, "--questions", str(questions)])
    out["guard_ms"] = (out["hybrid"]["server_cpu_ms_per_req"] - out["lexical"]["server_cpu_ms_per_req"]
                       - out["embedding"]["cpu_ms_per_query"])
    out["open"] = {}
    for name, route in (("lexical", LEXICAL_ROUTE), ("hybrid", HYBRID_ROUTE)):
        rate = max(1.0, OPEN_FRACTION * out[name]["rps"])
        _say(f"{name}: open loop at {OPEN_FRACTION:.0%} of {out[name]['rps']:,.0f} req/s = {rate:,.0f} req/s")
        qs = stream.take(int(rate * (args.seconds + args.warmup)) + 10)
        before = outcomes(srv) if name == "hybrid" else {}
        o = open_loop(srv, CALLBACK.url_path(route), _bodies(work, f"{name}-open", route, qs), secret_file,
                      mode="hmac", rate=rate, seconds=args.seconds, warmup=args.warmup, redis_pid=redis_pid)
        if name == "hybrid":
            o["hybrid_share"], o["outcomes"] = hybrid_share(before, outcomes(srv))
        out["open"][name] = o
    return out
