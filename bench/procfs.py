"""Memory figures from /proc (Linux): VmHWM (peak resident) and VmRSS, in KiB."""

from __future__ import annotations

from pathlib import Path

__all__ = ["children", "memory_kib"]


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
