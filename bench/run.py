"""`python -m bench` / `make bench`: the whole benchmark in one run, printed as Markdown.

    python -m bench                     # 10k and 100k chunks (under 10 minutes on 2 cores)
    python -m bench --scale 1m          # adds 1M chunks (index build alone takes minutes)
    python -m bench --only --scale 2000 --seconds 1 --search-seconds 0.5   # a smoke run

Per scale: build the index in its own process, search it alone (1 and 2 threads), the
bm25s baseline on the same chunks (up to --baseline-max), then `kbgate serve` with
--workers hypercorn workers on a free loopback port against real Redis, loaded by
bench.loadgen at each --connections level. The floor (bench.floor, same hypercorn
settings) is loaded the same way once per run. Results: stdout, and
bench-results/bench-<time>.md and .json (bench-results/ is git-ignored).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.corpus import CORPORA, parse_scale, queries, scale_label
from bench.flame import summarize
from bench.procfs import cpu_seconds, memory_kib, system_busy_seconds
from bench.report import render
from tests.support.harness import Server, free_port, kbgate_argv

__all__ = ["main", "run"]

TENANT = "bench"
CALLBACK_PATH = f"/volcengine/{TENANT}"

DEFAULT_SCALES = ("10k", "100k")


def _phase(args: list[str], timeout: float = 3600) -> dict[str, Any]:
    """Run `python -m bench.phases ARGS` and return its JSON line. Raises RuntimeError."""
    proc = subprocess.run([sys.executable, "-m", "bench.phases", *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.phases {args[0]} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _redis_url() -> str:
    return os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_pid(url: str) -> int | None:
    import redis

    try:
        info = redis.Redis.from_url(url, socket_timeout=1).info("server")
        return int(info["process_id"]) if Path(f"/proc/{info['process_id']}").exists() else None
    except (redis.RedisError, OSError, KeyError):
        return None


def write_config(workdir: Path, indexes_dir: Path, index: str, port: int, workers: int,
                 redis_url: str) -> tuple[Path, Path]:
    """(config path, secret file) for serving `index` on 127.0.0.1:port: tenant `bench`, route
    bench/bench, Redis replay store with a per-run key prefix, tolerance 120 s so benchmark
    nonces expire soon."""
    workdir.mkdir(parents=True, exist_ok=True)
    secret_file = workdir / "bench.secret"
    if not secret_file.exists():
        secret_file.write_text(secrets.token_urlsafe(32))
        secret_file.chmod(0o600)
    cfg = workdir / f"gateway-{index}.toml"
    cfg.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\nworkers = {workers}\n'
        f'[replay]\nredis_url = {json.dumps(redis_url)}\ntolerance_seconds = 120\n'
        f'key_prefix = "kbgate-bench-{os.getpid()}"\n'
        f'[indexes]\ndir = {json.dumps(str(indexes_dir.resolve()))}\n'
        f'[log]\nlevel = "info"\n'
        f'[tenants.{TENANT}]\n[[tenants.{TENANT}.secrets]]\nid = "bench"\n'
        f'value_file = {json.dumps(str(secret_file.resolve()))}\n'
        f'[[tenants.{TENANT}.routes]]\nfirst_level_id = "bench"\nsecond_level_id = "bench"\n'
        f'index = "{index}"\n'
    )
    return cfg, secret_file


def floor_argv(config: Path, port: int, workers: int) -> list[str]:
    return [sys.executable, "-m", "bench.floor", "--config", str(config), "--bind", f"127.0.0.1:{port}",
            "--workers", str(workers)]


def sample_answer(base: str, secret: str, query: str) -> bytes:
    """One real signed callback's answer body (Ret must be 0). Raises RuntimeError."""
    import httpx
    import orjson

    from gateway.volcengine.signing import sign_headers

    body = orjson.dumps({"FirstLevelId": "bench", "SecondLevelId": "bench", "Query": query, "Limit": 5})
    r = httpx.post(f"{base}{CALLBACK_PATH}", content=body, timeout=10.0,
                   headers=sign_headers(secret, body, int(time.time())))
    if orjson.loads(r.content).get("Ret") != 0:
        raise RuntimeError(f"sample callback failed: {r.status_code} {r.text[:200]}")
    return r.content


def _memory(server: Server) -> list[dict[str, int]]:
    """[{'pid', 'VmHWM', 'VmRSS'} in KiB] of each worker."""
    return [{"pid": pid, **memory_kib(pid)} for pid in server.workers()]


def _load(server: Server, secret_file: Path, connections: int, seconds: float, warmup: float,
          redis_pid: int | None) -> dict[str, Any]:
    """One load run against `server`; adds CPU shares (percent of all CPUs) of the load
    generator and of processes other than ours (server, workers, generator, Redis)."""
    served = [server.proc.pid, *server.workers()] if server.proc else []
    ours = served + ([redis_pid] if redis_pid else [])
    cpu0 = sum(cpu_seconds(p) for p in ours)
    srv0 = sum(cpu_seconds(p) for p in served)
    red0 = cpu_seconds(redis_pid) if redis_pid else 0.0
    busy0, total0 = system_busy_seconds()
    proc = subprocess.run(
        [sys.executable, "-m", "bench.loadgen", "--port", str(server.port), "--path", CALLBACK_PATH,
         "--secret-file", str(secret_file), "--connections", str(connections), "--seconds", str(seconds),
         "--warmup", str(warmup)], capture_output=True, text=True, timeout=seconds + warmup + 120)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.loadgen failed:\n{proc.stderr[-3000:]}")
    r: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    busy1, total1 = system_busy_seconds()
    cpu1 = sum(cpu_seconds(p) for p in ours)
    served_requests = max(1, r["requests"])  # warm-up requests cost CPU too: see below
    r["server_cpu_s"] = sum(cpu_seconds(p) for p in served) - srv0
    r["redis_cpu_s"] = (cpu_seconds(redis_pid) - red0) if redis_pid else 0.0
    # CPU per measured request over the whole run (warm-up included): an upper bound.
    r["server_cpu_ms_per_req"] = 1000 * r["server_cpu_s"] / served_requests
    elapsed_cpu = max(1e-9, total1 - total0)  # all CPUs' seconds over the run
    r["loadgen_cpu_pct"] = 100 * r["cpu_s"] / elapsed_cpu
    r["other_cpu_pct"] = max(0.0, 100 * ((busy1 - busy0) - (cpu1 - cpu0) - r["cpu_s"]) / elapsed_cpu)
    if r["requests"] != r["ok"] or r["errors"]:
        _say(f"warning: {r['requests'] - r['ok']} non-2xx, {r['errors']} errors ({r['statuses']}, {r['first_error']})")
    return r


def _profile(server: Server, secret_file: Path, out: Path, seconds: float = 5.0) -> str:
    """py-spy (raw collapsed stacks) of one worker during a 32-connection load; summary."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return "(py-spy not installed: `.venv/bin/pip install py-spy`)"
    gen = subprocess.Popen(
        [sys.executable, "-m", "bench.loadgen", "--port", str(server.port), "--path", CALLBACK_PATH,
         "--secret-file", str(secret_file), "--connections", "32", "--seconds", str(seconds + 1),
         "--warmup", "0.5"], stdout=subprocess.DEVNULL)
    time.sleep(1.0)
    subprocess.run([spy, "record", "-r", "250", "-d", str(seconds), "-f", "raw", "-o", str(out),
                    "--pid", str(server.workers()[0])], capture_output=True, timeout=seconds + 60)
    gen.wait(seconds + 60)
    return summarize(out, 20) if out.exists() else "(py-spy produced no profile; is ptrace allowed?)"


def run(args: argparse.Namespace) -> dict[str, Any]:
    """The whole benchmark; returns the result dict rendered by bench.report."""
    scales = [parse_scale(s) for s in ([] if args.only else list(DEFAULT_SCALES)) + list(args.scale)]
    scales = sorted(set(scales))
    if not scales:
        raise SystemExit("bench: no scale given")
    if not CORPORA.is_dir():
        raise SystemExit(f"bench: the shared corpora are missing at {CORPORA}")
    out_dir = Path(args.out)
    work = Path(args.workdir) if args.workdir else out_dir / "work"
    shutil.rmtree(work, ignore_errors=True)
    (work / "indexes").mkdir(parents=True)
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    redis_url = _redis_url()
    redis_pid = _redis_pid(redis_url)
    if redis_pid is None and not args.allow_remote_redis:
        _say(f"note: Redis at {redis_url} is not a local process; its CPU is counted as 'other'")
    result: dict[str, Any] = {
        "environment": {
            "started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
            "command": "python -m bench " + shlex.join(sys.argv[1:]) if args.argv is None else
                       "python -m bench " + shlex.join(args.argv),
            "cpus": os.cpu_count(), "python": platform.python_version(), "workers": args.workers,
            "redis": redis_url, "loadavg_start": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "loadgen": "bench.loadgen (Python asyncio + uvloop, keep-alive, one process)",
            "baseline_max": args.baseline_max,
        },
        "scales": [],
        "floor": [],
    }
    levels = [int(c) for c in args.connections.split(",")]
    floor_body: Path | None = None
    for n in scales:
        label = scale_label(n)
        name = f"bench-{label}"
        _say(f"{label}: building the index ({n:,} chunks)")
        s: dict[str, Any] = {"label": label, "chunks": n}
        s["index"] = _phase(["index", "--dir", str(work / "indexes"), "--index", name, "--chunks", str(n)])
        _say(f"{label}: {s['index']['chunks_per_s']:,.0f} chunks/s; searching alone")
        s["search"] = _phase(["search", "--dir", str(work / "indexes"), "--index", name,
                              "--seconds", str(args.search_seconds), "--threads", "1", "2"])
        if n <= parse_scale(args.baseline_max):
            _say(f"{label}: bm25s baseline on the same chunks")
            s["baseline"] = _phase(["baseline", "--chunks", str(n), "--seconds", str(args.search_seconds),
                                    "--threads", "1", "2"])
        else:
            s["baseline"] = None
        port = free_port()
        cfg, secret_file = write_config(work, work / "indexes", name, port, args.workers, redis_url)
        with Server(kbgate_argv(cfg, workers=args.workers), port, log_path=work / f"serve-{label}.log",
                    workers=args.workers) as srv:
            if floor_body is None:
                floor_body = work / "floor-body.json"
                floor_body.write_bytes(sample_answer(srv.base, secret_file.read_text().strip(), queries()[0]))
            s["e2e"] = []
            for c in levels:
                _say(f"{label}: kbgate, {c} connections, {args.seconds} s")
                s["e2e"].append(_load(srv, secret_file, c, args.seconds, args.warmup, redis_pid))
            s["worker_memory"] = _memory(srv)
            if args.profile:
                _say(f"{label}: py-spy on one worker")
                s["profile"] = _profile(srv, secret_file, out_dir / f"pyspy-{stamp}-{label}.txt")
        result["scales"].append(s)
        if n == scales[0]:
            port = free_port()
            with Server(floor_argv(cfg, port, args.workers), port, log_path=work / "floor.log",
                        env={"BENCH_FLOOR_BODY": str(floor_body)}, workers=args.workers) as flr:
                for c in levels:
                    _say(f"floor, {c} connections, {args.seconds} s")
                    result["floor"].append(_load(flr, secret_file, c, args.seconds, args.warmup, redis_pid))
                result["floor_memory"] = _memory(flr)
    result["environment"]["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if not args.keep_indexes:
        shutil.rmtree(work / "indexes", ignore_errors=True)
    md = render(result)
    (out_dir / f"bench-{stamp}.md").write_text(md, encoding="utf-8")
    (out_dir / f"bench-{stamp}.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
    result["markdown"] = md
    result["files"] = [str(out_dir / f"bench-{stamp}.md"), str(out_dir / f"bench-{stamp}.json")]
    return result


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--scale", action="append", default=[],
                   help="add a corpus size in chunks (2000, 10k, 1m); repeatable; default scales 10k and 100k")
    p.add_argument("--only", action="store_true", help="run only the --scale sizes given, not the defaults")
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per load level (default 10)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each load level")
    p.add_argument("--connections", default="8,32", help="load levels, comma-separated (default 8,32)")
    p.add_argument("--search-seconds", type=float, default=3.0, help="seconds per search-alone run")
    p.add_argument("--workers", type=int, default=2, help="hypercorn workers (default 2, one per core)")
    p.add_argument("--baseline-max", default="100k", help="largest scale the bm25s baseline is built for")
    p.add_argument("--profile", action="store_true", help="attach py-spy to one worker under load per scale")
    p.add_argument("--out", default="bench-results", help="folder for the .md/.json results")
    p.add_argument("--workdir", default=None, help="scratch folder (default OUT/work; emptied first)")
    p.add_argument("--keep-indexes", action="store_true", help="keep the built indexes in the workdir")
    p.add_argument("--allow-remote-redis", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = argv
    result = run(args)
    print(result["markdown"])
    _say("written " + ", ".join(result["files"]))
    return 0
