"""One load run against a running server, with the CPU it cost on each side.

Rationale: docs/design-notes.md, "bench/measure.py".
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.procfs import cpu_seconds, memory_kib, system_busy_seconds
from bench.wrk import run_wrk
from gateway.ops.processes import Server

__all__ = ["closed_loop", "open_loop", "with_cpu"]


def with_cpu(server: Server, redis_pid: int | None, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Call `run()` (a generator run returning requests/sent and cpu_s) and add the CPU
    figures of the module docstring."""
    served = [server.proc.pid, *server.workers()] if server.proc else []
    ours = served + ([redis_pid] if redis_pid else [])
    cpu0 = sum(cpu_seconds(p) for p in ours)
    srv0 = sum(cpu_seconds(p) for p in served)
    red0 = cpu_seconds(redis_pid) if redis_pid else 0.0
    busy0, total0 = system_busy_seconds()
    r = run()
    busy1, total1 = system_busy_seconds()
    cpu1 = sum(cpu_seconds(p) for p in ours)
    r["server_cpu_s"] = sum(cpu_seconds(p) for p in served) - srv0
    r["redis_cpu_s"] = (cpu_seconds(redis_pid) - red0) if redis_pid else 0.0
    answered = max(1, int(r.get("sent", r["requests"])))
    r["server_cpu_ms_per_req"] = 1000 * r["server_cpu_s"] / answered
    elapsed = max(1e-9, total1 - total0)  # all CPUs' seconds over the run
    r["loadgen_cpu_pct"] = 100 * r["cpu_s"] / elapsed
    r["other_cpu_pct"] = max(0.0, 100 * ((busy1 - busy0) - (cpu1 - cpu0) - r["cpu_s"]) / elapsed)
    return r


def closed_loop(server: Server, path: str, bodies: Path, secret_file: Path, *, mode: str, connections: int,
                seconds: float, redis_pid: int | None, warmup_bodies: Path | None = None, warmup: float = 0.0,
                threads: int = 2, headers: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """wrk for `seconds` (after an unmeasured wrk run of `warmup` s on `warmup_bodies`)."""
    url = f"{server.base}{path}"
    if warmup > 0 and warmup_bodies is not None:
        run_wrk(url, warmup_bodies, secret_file, mode=mode, connections=connections, threads=threads,
                seconds=warmup, headers=headers)
    return with_cpu(server, redis_pid, lambda: run_wrk(url, bodies, secret_file, mode=mode, connections=connections,
                                                         threads=threads, seconds=seconds, headers=headers))


def open_loop(server: Server, path: str, bodies: Path, secret_file: Path, *, mode: str, rate: float,
              seconds: float, warmup: float, redis_pid: int | None,
              headers: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """bench.openloop at `rate` requests/s for `warmup` + `seconds`. Raises RuntimeError."""
    argv = [sys.executable, "-m", "bench.openloop", "--port", str(server.port), "--path", path, "--mode", mode,
            "--bodies", str(bodies), "--secret-file", str(secret_file), "--rate", f"{rate:.3f}",
            "--seconds", str(seconds), "--warmup", str(warmup)]
    for k, v in headers:
        argv += ["--header", f"{k}: {v}"]

    def run() -> dict[str, Any]:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + warmup + 120)
        if proc.returncode != 0:
            raise RuntimeError(f"bench.openloop failed:\n{proc.stderr[-3000:]}")
        return dict(json.loads(proc.stdout.strip().splitlines()[-1]))

    return with_cpu(server, redis_pid, run)


def worker_memory(server: Server) -> list[dict[str, int]]:
    """[{'pid', 'VmHWM', 'VmRSS'} in KiB] of each worker of `server`."""
    return [{"pid": pid, **memory_kib(pid)} for pid in server.workers()]
