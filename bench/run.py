"""`python -m bench` / `make bench`: the whole benchmark in one run, printed as Markdown.

Rationale: docs/design-notes.md, "bench/run.py".
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from bench import realcorpora
from bench.corpus import CORPORA, parse_scale, queries, scale_label
from bench.hybrid import hybrid_share, outcomes, wait_until_hybrid
from bench.measure import closed_loop, worker_memory
from bench.phases import run_phase
from bench.realcorpora import embedding_cache
from bench.report import render
from bench.stack import CALLBACK_PATH, LEXICAL, gateway_argv, throwaway_redis, write_config
from bench.workload import callback_body, write_bodies
from gateway.ops.processes import Server, free_port

__all__ = ["main", "plan", "run"]

DEFAULT_SCALES = ("100k",)
CURVE = "curve"
CURVE_LEXICAL, CURVE_HYBRID = ("100k", "1m"), ("100k",)
"""`--scale` alone: the lexical path at 100k and 1M chunks, the hybrid path at 100k."""


def _say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _redis_pid(url: str) -> int | None:
    import redis

    try:
        info = redis.Redis.from_url(url, socket_timeout=1).info("server")
        return int(info["process_id"]) if Path(f"/proc/{info['process_id']}").exists() else None
    except (redis.RedisError, OSError, KeyError):
        return None


def plan(args: argparse.Namespace) -> tuple[list[int], list[int]]:
    """(lexical scale-study sizes, hybrid ones) in chunks. `--scale` alone (CURVE) is the curve:
    CURVE_LEXICAL and CURVE_HYBRID (unless --hybrid-scale names others), and it sets --only and
    --no-corpora on `args`. Raises ValueError for a size that does not parse."""
    if CURVE in args.scale:
        args.scale = [s for s in args.scale if s != CURVE] + list(CURVE_LEXICAL)
        args.hybrid_scale = list(args.hybrid_scale) or list(CURVE_HYBRID)
        args.only = args.no_corpora = True
    scales = sorted({parse_scale(s) for s in ([] if args.only else list(DEFAULT_SCALES)) + list(args.scale)})
    return scales, sorted({parse_scale(s) for s in args.hybrid_scale}) if args.hybrid != LEXICAL else []


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark; returns the result dict rendered by bench.report."""
    scales, hybrid_scales = plan(args)
    if not CORPORA.is_dir():
        raise SystemExit(f"bench: the shared corpora are missing at {CORPORA}")
    out_dir = Path(args.out)
    work = Path(args.workdir) if args.workdir else out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "indexes").mkdir(parents=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    with throwaway_redis() as (redis_url, started_pid):
        redis_pid = started_pid or _redis_pid(redis_url)
        if redis_pid is None:
            _say(f"note: Redis at {redis_url} is not a local process; its CPU is counted as 'other'")
        result: dict[str, Any] = {
            "environment": {
                "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                "command": "python -m bench " + shlex.join(sys.argv[1:] if args.argv is None else args.argv),
                "cpus": os.cpu_count(), "python": platform.python_version(), "workers": args.workers,
                "redis": redis_url + (" (throwaway redis-server)" if started_pid else ""),
                "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                "loadgen": "closed loop: wrk (Debian) with bench/wrk_signed.lua, 2 threads; "
                           "open loop: bench.openloop (Python asyncio + uvloop, one process)",
                "baseline_max": args.baseline_max,
            },
            "scales": [],
        }
        if not args.no_corpora:
            result["corpora"] = realcorpora.run_corpora(args, work, out_dir, stamp, redis_url, redis_pid)
        for n, dense in [(n, LEXICAL) for n in scales] + [(n, args.hybrid) for n in hybrid_scales]:
            result["scales"].append(_scale(args, n, work, redis_url, redis_pid, dense))
        if not args.no_build:
            result["build"] = _build(args, result["scales"])
    result["environment"]["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if not args.keep_indexes:
        shutil.rmtree(work / "indexes", ignore_errors=True)
    md = render(result)
    (out_dir / f"bench-{stamp}.md").write_text(md, encoding="utf-8")
    (out_dir / f"bench-{stamp}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    result["markdown"] = md
    result["files"] = [str(out_dir / f"bench-{stamp}.md"), str(out_dir / f"bench-{stamp}.json")]
    return result


def _scale(args: argparse.Namespace, n: int, work: Path, redis_url: str, redis_pid: int | None,
           dense: str = LEXICAL) -> dict[str, Any]:
    """The scale study at `n` chunks on one path (dense: "none" or an embedded model): build,
    search alone, bm25s (lexical only), kbgate under the closed loop (answer cache off)."""
    hybrid = dense != LEXICAL
    label = scale_label(n) + (" hybrid" if hybrid else "")
    name = f"bench-{scale_label(n)}" + ("-hybrid" if hybrid else "")
    _say(f"{label}: building the index ({n:,} chunks{', embedding them with ' + dense if hybrid else ''})")
    s: dict[str, Any] = {"label": label, "chunks": n, "dense": dense}
    s["index"] = run_phase(["index", "--dir", str(work / "indexes"), "--index", name, "--chunks", str(n),
                            "--dense", dense, "--cache-dir", str(embedding_cache(args))], timeout=6 * 3600)
    _say(f"{label}: {s['index']['chunks_per_s']:,.0f} chunks/s; searching alone")
    s["search"] = run_phase(["search", "--dir", str(work / "indexes"), "--index", name, "--dense", dense,
                             "--seconds", str(args.search_seconds), "--threads", "1", "2"])
    s["baseline"] = None
    if n <= parse_scale(args.baseline_max) and not hybrid:
        _say(f"{label}: bm25s baseline on the same chunks")
        s["baseline"] = run_phase(["baseline", "--chunks", str(n), "--seconds", str(args.search_seconds),
                                "--threads", "1", "2"])
    port = free_port()
    cfg, secret_file = write_config(work, work / "indexes", name, port, args.workers, redis_url, dense=dense)
    bodies = work / f"bodies-scale-{name}.txt"
    write_bodies(bodies, (callback_body("bench", "bench", q) for q in queries()))
    with Server(gateway_argv(cfg, args.workers), port, work / f"serve-{name}.log") as srv:
        if hybrid:
            wait_until_hybrid(srv, secret_file.read_text().strip(), queries(), index=name, route="bench")
        s["e2e"] = []
        for c in [args.hybrid_connections] if hybrid else (int(x) for x in args.connections.split(",")):
            _say(f"{label}: kbgate, {c} connections, {args.seconds} s")
            before = outcomes(srv, name) if hybrid else {}
            r = closed_loop(srv, CALLBACK_PATH, bodies, secret_file, mode="hmac", connections=c,
                            seconds=args.seconds, redis_pid=redis_pid, warmup_bodies=bodies, warmup=args.warmup)
            if hybrid:
                r["hybrid_share"], r["outcomes"] = hybrid_share(before, outcomes(srv, name))
            s["e2e"].append(r)
        s["worker_memory"] = worker_memory(srv)
    return s


def _build(args: argparse.Namespace, scales: list[dict[str, Any]]) -> dict[str, Any]:
    """bench.build's figures: the embedding on one thread and on every core, the vectors' costs,
    and the Tantivy build at 100k chunks (the scale study's, when it built 100k)."""
    from bench import build
    from indexes.dense.parallel import build_workers

    _say(f"build costs: embedding {args.build_embed:,} chunks on one thread, then on {build_workers()} processes")
    load_before = os.getloadavg()
    out: dict[str, Any] = {"embedding": build.measure_embedding(args.build_embed, build_workers())}
    at_100k = next((s["index"] for s in scales if s["chunks"] == 100_000 and s.get("dense", LEXICAL) == LEXICAL), None)
    out["tantivy"] = at_100k if at_100k is not None else build.measure_tantivy(parse_scale(args.build_chunks))
    out["loadavg"] = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="shorter loads (3 s measured, 0.5 s warm-up, 1 s search runs): same phases, noisier figures")
    p.add_argument("--scale", action="append", default=[], nargs="?", const=CURVE,
                   help="add a scale-study size in chunks (2000, 10k, 1m); repeatable; default 100k. Alone "
                        "(no size): the curve, lexical at 100k and 1M and hybrid at 100k, nothing else")
    p.add_argument("--hybrid-scale", action="append", default=[],
                   help="add a scale-study size built and served hybrid (--hybrid's model); repeatable")
    p.add_argument("--only", action="store_true", help="run only the --scale sizes given, not the default 100k")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per load run (default 10)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each load run")
    p.add_argument("--connections", default="32", help="scale study: closed-loop connections, comma-separated")
    p.add_argument("--search-seconds", type=float, default=3.0, help="seconds per search-alone run")
    p.add_argument("--workers", type=int, default=2, help="hypercorn workers (default 2, one per core)")
    p.add_argument("--baseline-max", default="100k", help="largest scale the bm25s baseline is built for")
    p.add_argument("--profile", action="store_true", help="py-spy on one worker under the TiDB closed loop")
    p.add_argument("--out", default="bench-results", help="folder for the .md/.json results")
    p.add_argument("--workdir", default=None, help="scratch folder (default OUT/work; emptied first)")
    p.add_argument("--keep-indexes", action="store_true", help="keep the built indexes in the workdir")
    p.add_argument("--no-build", action="store_true", help="leave out the build costs (bench.build)")
    p.add_argument("--build-embed", type=int, default=2000, metavar="N",
                   help="chunks embedded for the build costs (default 2000)")
    p.add_argument("--build-chunks", default="100k", metavar="N",
                   help="chunks of the build costs' Tantivy build when the scale study built no 100k (default 100k)")
    realcorpora.add_arguments(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = argv
    if args.quick:
        args.seconds, args.warmup, args.search_seconds = min(args.seconds, 3.0), min(args.warmup, 0.5), 1.0
        args.versus_seconds = min(args.versus_seconds, 3.0)
        args.build_embed = min(args.build_embed, 300)
    result = run(args)
    print(result["markdown"])
    _say("written " + ", ".join(result["files"]))
    return 0
