"""Memory figures from /proc (Linux): VmHWM (peak resident) and VmRSS, in KiB."""

from __future__ import annotations

from pathlib import Path

__all__ = ["children", "cpu_seconds", "memory_kib", "system_busy_seconds"]


def memory_kib(pid: int | str = "self") -> dict[str, int]:
    """{'VmHWM': KiB, 'VmRSS': KiB} of a process; {} when it is gone."""
    out: dict[str, int] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS"):
            out[key] = int(value.split()[0])
    return out


def children(pid: int) -> list[int]:
    """Direct child process ids of `pid` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out.extend(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return sorted(set(out))


def cpu_seconds(pid: int | str = "self") -> float:
    """User + system CPU seconds of a process (all its threads); 0.0 when it is gone."""
    import os

    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def system_busy_seconds() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine since boot, from /proc/stat."""
    import os

    values = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + values[4]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(values) - idle) / tick, sum(values) / tick
