"""Closed-loop load with wrk (Debian's `wrk` package), every request freshly signed.

Rationale: docs/design-notes.md, "bench/wrk.py".
"""

from __future__ import annotations

import json
import resource
import secrets
import shutil
import string
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["SCRIPT", "WrkMissing", "run_wrk", "wrk_path"]

SCRIPT = Path(__file__).with_name("wrk_signed.lua")


class WrkMissing(RuntimeError):
    """wrk is not installed (`apt-get install wrk`)."""


def wrk_path() -> str:
    """Path of the wrk binary. Raises WrkMissing."""
    found = shutil.which("wrk")
    if not found:
        raise WrkMissing("wrk is not installed: `apt-get install wrk` (bench/ensure-tools.sh does it)")
    return found


def _children_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_wrk(url: str, bodies: Path, secret_file: Path, *, mode: str = "hmac", connections: int = 32,
            threads: int = 2, seconds: float = 10.0, timeout_s: float = 10.0,
            headers: tuple[tuple[str, str], ...] = ()) -> dict[str, Any]:
    """One wrk run against `url` (POST); returns the result dict of the module docstring.

    mode: "hmac" (Volcengine signing with the key in `secret_file`) or "bearer" (the
    token in `secret_file`); headers: extra (name, value) request headers.
    Raises WrkMissing, RuntimeError when wrk fails or prints no result.
    """
    if mode not in ("hmac", "bearer"):
        raise ValueError(f"mode must be hmac or bearer, not {mode!r}")
    prefix = "".join(secrets.choice(string.ascii_letters) for _ in range(8))
    header_file = ""
    if headers:
        header_file = str(bodies.with_suffix(".headers"))
        Path(header_file).write_text("".join(f"{k}: {v}\n" for k, v in headers), encoding="utf-8")
    argv = [wrk_path(), "-t", str(threads), "-c", str(max(connections, threads)), "-d", f"{max(1, round(seconds))}s",
            "--timeout", f"{timeout_s:g}s", "-s", str(SCRIPT), url, "--", mode, str(bodies), str(secret_file),
            str(threads), prefix, header_file]
    cpu0 = _children_cpu()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + timeout_s + 60)
    cpu = _children_cpu() - cpu0
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"wrk failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    w = json.loads(line)
    secs = w["duration_us"] / 1e6
    ok = w["requests"] - w["status_errors"]
    return {
        "tool": "wrk",
        "connections": connections,
        "threads": threads,
        "requests": w["requests"],
        "ok": ok,
        "non_2xx": w["status_errors"],
        "errors": w["connect_errors"] + w["read_errors"] + w["write_errors"] + w["timeouts"],
        "seconds": secs,
        "rps": ok / secs if secs else 0.0,
        "p50_ms": w["p50_us"] / 1000,
        "p99_ms": w["p99_us"] / 1000,
        "p999_ms": w["p999_us"] / 1000,
        "max_ms": w["max_us"] / 1000,
        "mean_ms": w["mean_us"] / 1000,
        "wrapped": w["wrapped"],
        "cpu_s": cpu,
    }
