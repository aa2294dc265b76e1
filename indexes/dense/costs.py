"""What building an index's vectors costs, measured on the build itself and printed once.

Rationale: docs/design-notes.md, "indexes/dense/costs.py".
"""

from __future__ import annotations

import tracemalloc
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BuildCosts", "folder_bytes"]

PER_CHUNKS = 100_000


def folder_bytes(folder: Path) -> int:
    """Bytes of the files directly inside `folder` (0 when it is missing)."""
    try:
        return sum(p.stat().st_size for p in Path(folder).iterdir() if p.is_file())
    except OSError:
        return 0


@dataclass(frozen=True, slots=True)
class BuildCosts:
    """chunks: vectors in the published set. embedded: chunks the model embedded in this build.
    cpu_seconds / wall_seconds: the model's CPU (every process) and elapsed time on them.
    workers: processes it embedded on. disk_bytes: the published generation's files.
    worker_bytes: Python memory of loading the set to serve (tracemalloc), per worker.
    served: a served model embedded them (its CPU is the server's: only the rate is ours)."""

    chunks: int
    embedded: int
    cpu_seconds: float
    wall_seconds: float
    workers: int
    disk_bytes: int
    worker_bytes: int
    served: bool = False

    @classmethod
    def measure(cls, generation_folder: Path, *, chunks: int, embedded: int, cpu_seconds: float,
                wall_seconds: float, workers: int, served: bool = False) -> BuildCosts:
        """Costs of a publish into `generation_folder` (loads the set once to measure memory)."""
        from .vectors import load

        tracemalloc.start()
        try:
            loaded = load(generation_folder, view=True)
            worker_bytes = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        del loaded
        return cls(chunks, embedded, cpu_seconds, wall_seconds, workers, folder_bytes(generation_folder), worker_bytes,
                   served)

    @property
    def cpu_per_1000(self) -> float | None:
        """CPU seconds per 1,000 chunks embedded (None when nothing was embedded)."""
        return self.cpu_seconds * 1000 / self.embedded if self.embedded else None

    @property
    def rate(self) -> float | None:
        """Chunks embedded per second of wall time (None when nothing was embedded)."""
        return self.embedded / self.wall_seconds if self.embedded and self.wall_seconds > 0 else None

    def per_100k(self, value: int) -> float:
        """`value` (bytes for `chunks` chunks) scaled to 100k chunks, in MB."""
        return value * PER_CHUNKS / self.chunks / 1e6 if self.chunks else 0.0

    def line(self, name: str) -> str:
        """One line: what this build cost and what 100k chunks would (extrapolated)."""
        cpu, rate = self.cpu_per_1000, self.rate or 0.0
        if cpu is None:
            embed = "nothing embedded (every vector kept or cached)"
        elif self.served:
            embed = f"embedded by the served model at {rate:.0f} chunks/s"
        else:
            embed = (f"embedding {cpu:.1f} CPU-s per 1,000 chunks on {self.workers} process"
                     f"{'es' if self.workers != 1 else ''} ({rate:.1f} chunks/s)")
        return (f"index {name}: build costs: {embed}; per 100k chunks, extrapolated from this build's {self.chunks}: "
                f"vectors {self.per_100k(self.disk_bytes):.0f} MB on disk (mapped once per machine), "
                f"{self.per_100k(self.worker_bytes):.0f} MB of memory per worker")
