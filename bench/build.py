"""`python -m bench.build`: what building an index costs, side by side with the one-thread rate.

Rationale: docs/design-notes.md, "bench/build.py".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.corpus import documents, load_pool, parse_scale
from bench.phases import run_phase

__all__ = ["main", "measure", "render"]

EMBED_RATIO_TARGET = 1.8
TANTIVY_TARGET = 7_000.0


def _texts(n: int) -> list[tuple[str, str, str]]:
    """(chunk_id, doc_id, passage text) of the first `n` chunks of the scaled corpus."""
    from indexes.dense.texts import passage_text
    from indexes.ingest.chunking import chunk

    out: list[tuple[str, str, str]] = []
    for doc in documents(n, load_pool()):
        for i, c in enumerate(chunk(doc)):
            out.append((f"{doc.id}#{i}", doc.id, passage_text(doc.title, c.heading, c.text)))
    return out[:n]


def measure_embedding(n: int, workers: int, batch: int = 32) -> dict[str, Any]:
    """The embedding figures on `n` chunks (module doc), and the costs of publishing them."""
    import numpy as np

    from indexes.dense.config import default_dense
    from indexes.dense.costs import BuildCosts
    from indexes.dense.parallel import PassagePool
    from indexes.dense.providers import LocalEmbedder
    from indexes.dense.vectors import Entry, publish

    config = default_dense()
    texts = _texts(n)
    batches = [[t for _, _, t in texts[i:i + batch]] for i in range(0, len(texts), batch)]
    one = LocalEmbedder(config)
    one.warm()
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = np.vstack([one.embed_passages(b) for b in batches])
    one_wall, one_cpu = time.perf_counter() - wall, time.process_time() - cpu
    one.close()
    started = time.perf_counter()
    pool = PassagePool(config, workers)
    try:
        list(pool.embed([[texts[0][2]]] * (workers * 2)))  # every process has loaded its model
        start_seconds = time.perf_counter() - started
        wall = time.perf_counter()
        results = list(pool.embed(batches))
        pool_wall = time.perf_counter() - wall
    finally:
        pool.close()
    pool_cpu = sum(c for _, c in results)
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        entries = [Entry(cid, did, v) for (cid, did, _), v in zip(texts, vectors, strict=True)]
        folder = publish(Path(tmp), 1, config.fingerprint, vectors.shape[1], {d: "r" for _, d, _ in texts}, [], None,
                         entries)
        costs = BuildCosts.measure(folder, chunks=len(texts), embedded=len(texts), cpu_seconds=pool_cpu,
                                   wall_seconds=pool_wall, workers=workers)
    return {
        "chunks": len(texts), "workers": workers,
        "one_thread_per_s": len(texts) / one_wall, "one_thread_cpu_per_1000": one_cpu * 1000 / len(texts),
        "pool_per_s": len(texts) / pool_wall, "pool_cpu_per_1000": pool_cpu * 1000 / len(texts),
        "pool_start_seconds": start_seconds, "ratio": one_wall / pool_wall,
        "disk_mb_per_100k": costs.per_100k(costs.disk_bytes), "memory_mb_per_100k": costs.per_100k(costs.worker_bytes),
    }


def measure_tantivy(chunks: int) -> dict[str, Any]:
    """The Tantivy build of `chunks` chunks in its own process (`bench.phases index`)."""
    with tempfile.TemporaryDirectory(prefix="bench-build-") as tmp:
        return run_phase(["index", "--dir", tmp, "--index", "build", "--chunks", str(chunks)])


def measure(chunks: int, embed: int, workers: int) -> dict[str, Any]:
    """Every figure of the module doc, with the load average before and after."""
    load_before = os.getloadavg()
    out: dict[str, Any] = {"embedding": measure_embedding(embed, workers), "tantivy": measure_tantivy(chunks)}
    out["loadavg"] = [round(x, 2) for x in (*load_before, *os.getloadavg())]
    return out


def render(result: dict[str, Any]) -> str:
    """The figures as a Markdown section, each target beside its figure."""
    e, t = result["embedding"], result["tantivy"]
    n = e["workers"]
    ratio_met = "yes" if e["ratio"] >= EMBED_RATIO_TARGET else "no"
    rate_met = "yes" if t["chunks_per_s"] >= TANTIVY_TARGET else "no"
    load = result["loadavg"]
    return "\n".join([
        "### Build costs",
        "",
        f"Embedded default model on {e['chunks']:,} chunks of the scaled corpus; Tantivy on {t['chunks']:,} chunks. "
        f"Load average {load[0]:.2f} before, {load[3]:.2f} after.",
        "",
        f"| figure | one thread | {n} processes | target | met |",
        "|---|---|---|---|---|",
        f"| embedding, chunks/s | {e['one_thread_per_s']:.1f} | {e['pool_per_s']:.1f} ({e['ratio']:.2f}x; "
        f"pool start {e['pool_start_seconds']:.1f} s apart) | >= {EMBED_RATIO_TARGET}x the one-thread rate | "
        f"{ratio_met} |",
        f"| embedding, CPU-s per 1,000 chunks | {e['one_thread_cpu_per_1000']:.1f} | {e['pool_cpu_per_1000']:.1f} | "
        "| |",
        f"| vectors per 100k chunks (extrapolated from {e['chunks']:,}) | | disk {e['disk_mb_per_100k']:.0f} MB "
        f"(mapped once per machine), memory {e['memory_mb_per_100k']:.0f} MB per worker | | |",
        f"| Tantivy build, chunks/s at {t['chunks']:,} chunks | {t['chunks_per_s']:,.0f} | | >= {TANTIVY_TARGET:,.0f} "
        f"at 100k | {rate_met if t['chunks'] >= 100_000 else 'not at 100k'} |",
        "",
    ])


def main(argv: list[str] | None = None) -> int:
    from indexes.dense.parallel import build_workers

    p = argparse.ArgumentParser(prog="python -m bench.build", description=__doc__.split("\n\n")[0])
    p.add_argument("--chunks", default="100k", help="chunks of the Tantivy build (2000, 10k, 100k; default 100k)")
    p.add_argument("--embed", type=int, default=2000, help="chunks embedded for the embedding figures (default 2000)")
    p.add_argument("--workers", type=int, default=build_workers(), help="processes of the pool (default: every core)")
    p.add_argument("--json", action="store_true", help="print the figures as JSON after the table")
    args = p.parse_args(argv)
    result = measure(parse_scale(args.chunks), max(args.embed, 1), max(args.workers, 1))
    print(render(result))
    if args.json:
        print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
