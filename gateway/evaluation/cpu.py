"""CPU time of a process tree, for `kbgate eval`'s server CPU per callback (Linux /proc)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["tree_cpu_seconds"]


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds run by process `pid` and its descendants, all their threads (Linux /proc:
    the first field of each task's schedstat, in nanoseconds; 0.0 elsewhere). Threads that
    ended are not counted: the server's workers live as long as the run."""
    proc = Path("/proc")
    if not proc.is_dir():
        return 0.0
    parent: dict[int, int] = {}
    for entry in proc.iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parent[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])  # after "pid (comm) "
    total_ns, todo = 0, [pid]
    while todo:
        p = todo.pop()
        todo += [c for c, pp in parent.items() if pp == p]
        try:
            tasks = list((proc / str(p) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                total_ns += int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
    return total_ns / 1e9
