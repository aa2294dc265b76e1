"""bench/build.py: the build-cost section prints each figure beside its target and the one-thread
rate, and says when the Tantivy figure is not at 100k chunks (the measurement itself is a
program the lead runs on a quiet machine: no timed assertion here)."""

from __future__ import annotations

from typing import Any

from bench.build import render


def result(ratio: float, tantivy: float, chunks: int) -> dict[str, Any]:
    return {"embedding": {"chunks": 2000, "workers": 2, "one_thread_per_s": 60.0, "one_thread_cpu_per_1000": 14.0,
                          "pool_per_s": 60.0 * ratio, "pool_cpu_per_1000": 14.5, "pool_start_seconds": 2.0,
                          "ratio": ratio, "disk_mb_per_100k": 227.0, "memory_mb_per_100k": 26.0},
            "tantivy": {"chunks": chunks, "chunks_per_s": tantivy}, "loadavg": [0.5, 0.4, 0.3, 1.9, 0.8, 0.4]}


def test_each_build_figure_sits_beside_its_target_and_the_one_thread_rate() -> None:
    text = render(result(1.9, 8000.0, 100_000))
    assert ("| embedding, chunks/s | 60.0 | 114.0 (1.90x; pool start 2.0 s apart) | >= 1.8x the one-thread rate "
            "| yes |") in text
    assert "| Tantivy build, chunks/s at 100,000 chunks | 8,000 | | >= 7,000 at 100k | yes |" in text
    assert "disk 227 MB (mapped once per machine), memory 26 MB per worker" in text
    assert "Load average 0.50 before, 1.90 after." in text
    missed = render(result(1.2, 5000.0, 100_000))
    assert "(1.20x; pool start 2.0 s apart) | >= 1.8x the one-thread rate | no |" in missed
    assert "| >= 7,000 at 100k | no |" in missed
    assert "| not at 100k |" in render(result(1.9, 8000.0, 5000))
