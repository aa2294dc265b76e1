"""Servers side by side on the same callbacks, alternating: what `make bench` compares kbgate with
the minimal gateway by, and a developer's A/B of two kbgate checkouts.

Rationale: docs/design-notes.md, "bench/versus.py".
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.measure import closed_loop
from bench.workload import CORPUS_SOURCES, Stream, write_bodies
from gateway.ops.processes import Server

__all__ = ["alternate", "medians", "minimal_argv", "minimal_env"]


def _say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def minimal_argv(config: Path, port: int, workers: int) -> list[str]:
    """bench.minimal on the gateway's hypercorn settings from `config`."""
    return [sys.executable, "-m", "bench.minimal", "--config", str(config), "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers)]


def minimal_env(secret_file: Path, redis_url: str, indexes: Path) -> dict[str, str]:
    """bench.minimal's environment (its module docstring)."""
    return {"BENCH_MINIMAL_SECRET": str(secret_file), "BENCH_MINIMAL_REDIS": redis_url,
            "BENCH_MINIMAL_INDEXES": str(indexes), "BENCH_MINIMAL_PREFIX": f"bench-minimal-{time.time_ns()}"}


Rows = dict[str, list[dict[str, Any]]]


def alternate(servers: Sequence[tuple[str, Server]], path: str, bodies: Sequence[Path], secret_file: Path, *,
              connections: int, seconds: float, warmup: float, redis_pid: int | None) -> Rows:
    """One closed loop per server per round (len(bodies) rounds, round r on bodies[r], the
    servers' order rotated by r); {name: [row per round]}."""
    out: Rows = {name: [] for name, _ in servers}
    for r, body in enumerate(bodies):
        order = [servers[(i + r) % len(servers)] for i in range(len(servers))]
        for name, srv in order:
            _say(f"round {r + 1}/{len(bodies)}: {name}, {seconds:g} s")
            row = closed_loop(srv, path, body, secret_file, mode="hmac", connections=connections, seconds=seconds,
                              redis_pid=redis_pid, warmup_bodies=body, warmup=warmup)
            row["round"] = r + 1
            out[name].append(row)
    return out


def medians(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over rounds: server_cpu_ms_per_req, rps, p99_ms; and the rounds' CPU figures."""
    return {"server_cpu_ms_per_req": statistics.median(r["server_cpu_ms_per_req"] for r in rows),
            "rps": statistics.median(r["rps"] for r in rows), "p99_ms": statistics.median(r["p99_ms"] for r in rows),
            "rounds": len(rows), "non_2xx": sum(r["non_2xx"] + r["errors"] for r in rows),
            "cpu_each": [round(r["server_cpu_ms_per_req"], 3) for r in rows],
            "other_cpu_pct": statistics.median(r["other_cpu_pct"] for r in rows)}


def _build(args: argparse.Namespace, work: Path, corpus: str) -> None:
    extra = ["--limit", str(args.limit)] if args.limit else []
    for where, folder in ((None, work / "indexes"), (args.against, work / "against-indexes")):
        _say(f"{corpus}: index with {where or 'this checkout'}")
        subprocess.run([sys.executable, "-m", "bench.phases", "index", "--dir", str(folder), "--index", corpus,
                        "--corpus", corpus, *extra], cwd=where, check=True, capture_output=True)
    subprocess.run([sys.executable, "-m", "bench.phases", "minimal-index", "--dir", str(work / "minimal"),
                    "--index", corpus, "--corpus", corpus, *extra], check=True, capture_output=True)


def main(argv: list[str] | None = None) -> int:
    from bench.stack import CALLBACK_PATH, gateway_argv, throwaway_redis, write_routes_config
    from gateway.ops.processes import free_port

    p = argparse.ArgumentParser(prog="python -m bench.versus", description=__doc__.split("\n\n")[0])
    p.add_argument("--against", required=True, help="another kbgate checkout (its own indexer and server)")
    p.add_argument("--corpus", action="append", choices=tuple(CORPUS_SOURCES), help="default: both")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--work", default="bench-results/versus")
    p.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--no-build", action="store_true", help="reuse the indexes of an earlier run in --work")
    args = p.parse_args(argv)
    corpora = args.corpus or list(CORPUS_SOURCES)
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if not args.no_build:
        for corpus in corpora:
            _build(args, work, corpus)
    routes = {c: c for c in corpora}
    lines = []
    with throwaway_redis() as (redis_url, redis_pid):
        ports = [free_port() for _ in range(3)]
        mine = write_routes_config(work, work / "indexes", routes, ports[0], args.workers, redis_url, name="this",
                                   answer_cache_entries=0)
        theirs = write_routes_config(work, work / "against-indexes", routes, ports[1], args.workers, redis_url,
                                     name="against", answer_cache_entries=0)
        with Server(gateway_argv(mine.config, args.workers), ports[0], work / "this.log",
                    workers=args.workers) as a, \
                Server(gateway_argv(theirs.config, args.workers), ports[1], work / "against.log",
                       cwd=Path(args.against).resolve(), workers=args.workers) as b, \
                Server(minimal_argv(mine.config, ports[2], args.workers), ports[2], work / "minimal.log",
                       env=minimal_env(mine.secret_file, redis_url, work / "minimal"), workers=args.workers) as m:
            for corpus in corpora:
                stream = Stream(corpus, int(2500 * (args.seconds + args.warmup)) * args.rounds + 2000, args.limit)
                bodies = []
                for r in range(args.rounds):
                    path = work / f"bodies-{corpus}-{r}.txt"
                    from bench.workload import callback_body

                    write_bodies(path, (callback_body("bench", corpus, q)
                                        for q in stream.take(int(2500 * (args.seconds + args.warmup)))))
                    bodies.append(path)
                rows = alternate([("this", a), ("against", b), ("minimal", m)], CALLBACK_PATH, bodies,
                                 mine.secret_file, connections=args.connections, seconds=args.seconds,
                                 warmup=args.warmup, redis_pid=redis_pid)
                med = {k: medians(v) for k, v in rows.items()}
                for k, v in med.items():
                    lines.append(f"{corpus:13} {k:8} CPU {v['server_cpu_ms_per_req']:.3f} ms/cb {v['cpu_each']} "
                                 f"{v['rps']:,.0f} req/s p99 {v['p99_ms']:.1f} ms failed {v['non_2xx']} "
                                 f"other {v['other_cpu_pct']:.0f}%")
                mc = med["minimal"]["server_cpu_ms_per_req"]
                lines.append(f"{corpus:13} ratio to minimal: this {med['this']['server_cpu_ms_per_req'] / mc:.2f}, "
                             f"against {med['against']['server_cpu_ms_per_req'] / mc:.2f}")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
