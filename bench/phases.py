"""Measured phases, each run in its own process: `python -m bench.phases PHASE ...`.

Each prints one JSON object on stdout (figures below), so the orchestrator's own memory
and threads never mix into a measurement.

index     build `--index` under `--dir` with the indexer's real path
          (`IndexStore.create_or_open_for_write(...).ingest`) from the scaled corpus
          (`--chunks N`) or one real corpus (`--corpus cmrc2018|tidb-docs-cn`, optionally
          `--huge-chunks N`: plus one document of N chunks made from that corpus's text):
          chunks, documents, seconds, chunks_per_s, size_bytes, rss_before_kib (corpus
          materialized), hwm_kib (peak), huge_chunks (chunks of the huge document, 0 if none).
minimal-index  the minimal gateway's own index (bench.minimal.build_index) of one real corpus's
          documents under `--dir`/`--index`, one chunk per section: chunks, documents, seconds.
search    `KnowledgeIndex.search` with the route's filter from `gateway.core.scope.resolve_callback`
          (analysis, query with scope filter, doc fetch, excerpts: what a callback runs) for
          `--seconds` per thread count: per count qps, p50_ms, p99_ms.
baseline  bm25s + rjieba on the same chunks: build_seconds, chunks_per_s, hwm_kib, and the
          same search figures.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from bench.corpus import corpus_documents, documents, huge_document, load_pool, queries
from bench.procfs import memory_kib

__all__ = ["percentile", "run_phase", "run_threads"]

SEARCH_LIMIT = 5
"""Results per query: the callback's default Limit (search.default_limit)."""


def run_phase(args: list[str], timeout: float = 3600) -> dict[str, object]:
    """Run `python -m bench.phases ARGS` in its own process and return its JSON line.
    Raises RuntimeError (with the phase's stderr tail) when it fails."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "bench.phases", *args], capture_output=True, text=True,
                          timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"bench.phases {args[0]} failed:\n{proc.stderr[-3000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100) of an ascending list; 0.0 when empty."""
    if not sorted_values:
        return 0.0
    rank = max(1, min(len(sorted_values), int(round(p / 100.0 * len(sorted_values) + 0.5))))
    return sorted_values[rank - 1]


def run_threads(search: Callable[[str], object], qs: list[str], threads: int, seconds: float) -> dict[str, float]:
    """Call `search` in `threads` threads for `seconds` (queries cycled, each thread from
    its own offset). Returns queries, qps, p50_ms, p99_ms, mean_ms."""
    stop = time.perf_counter() + seconds
    lat: list[list[float]] = [[] for _ in range(threads)]

    def loop(k: int) -> None:
        mine = lat[k]
        i = k * 997
        n = len(qs)
        pc = time.perf_counter
        while True:
            t0 = pc()
            if t0 >= stop:
                return
            search(qs[i % n])
            mine.append(pc() - t0)
            i += 1

    started = time.perf_counter()
    pool = [threading.Thread(target=loop, args=(k,)) for k in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - started
    every = sorted(x for part in lat for x in part)
    return {
        "threads": threads,
        "queries": len(every),
        "qps": len(every) / wall,
        "p50_ms": percentile(every, 50) * 1000,
        "p99_ms": percentile(every, 99) * 1000,
        "mean_ms": statistics.fmean(every) * 1000 if every else 0.0,
    }


def _index(args: argparse.Namespace) -> dict[str, object]:
    from bench.workload import CORPUS_SOURCES
    from indexes.ingest import chunk
    from indexes.store import IndexStore

    huge = 0
    if args.corpus:
        docs = corpus_documents(CORPUS_SOURCES[args.corpus][0], args.limit)
        if args.huge_chunks:
            big = huge_document(args.huge_chunks, [c.text for d in docs for c in chunk(d)])
            huge = len(chunk(big))
            docs.append(big)
    else:
        docs = list(documents(args.chunks, load_pool()))
    before = memory_kib()
    store = IndexStore(Path(args.dir))
    started = time.perf_counter()
    report = store.create_or_open_for_write(args.index).ingest(docs, delete_missing=False, progress=False)
    took = time.perf_counter() - started
    folder = Path(args.dir) / args.index
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    return {
        "chunks": report.chunks,
        "documents": report.added,
        "seconds": took,
        "chunks_per_s": report.chunks / took,
        "docs_per_s": report.added / took,
        "size_bytes": size,
        "rss_before_kib": before.get("VmRSS", 0),
        "hwm_kib": memory_kib().get("VmHWM", 0),
        "huge_chunks": huge,
    }


def _minimal_index(args: argparse.Namespace) -> dict[str, object]:
    from bench.minimal import build_index
    from bench.workload import CORPUS_SOURCES

    docs = corpus_documents(CORPUS_SOURCES[args.corpus][0], args.limit)
    started = time.perf_counter()
    chunks = build_index(Path(args.dir) / args.index, [
        (d.id, d.title, [t for s in d.sections if (t := f"{s.heading}\n{s.text}" if s.heading else s.text).strip()])
        for d in docs])
    return {"chunks": chunks, "documents": len(docs), "seconds": time.perf_counter() - started}


def _search(args: argparse.Namespace) -> dict[str, object]:
    from gateway.core.config import Route, Tenant
    from gateway.core.scope import resolve_callback
    from indexes.store import IndexStore

    index = IndexStore(Path(args.dir)).open(args.index)
    tenant = Tenant("bench", "/volcengine/bench", "enforce", (), (Route("bench", "bench", args.index),))
    flt = resolve_callback(tenant, "bench", "bench", None).filter  # exactly what a callback searches with
    qs = queries()

    def one(q: str) -> object:
        return index.search(q, SEARCH_LIMIT, filter=flt, one_per_document=True,
                            summary_chars=200, content_chars=1500)

    # Warm the page cache with the whole index (a 1M index is ~1.3 GB: 200 queries touch a
    # fraction of it, and the first measured run would read the rest from disk), then the
    # analysers and Tantivy's caches with real queries for as long as one measured run.
    for f in sorted(Path(args.dir, args.index).iterdir()):
        if f.is_file():
            with f.open("rb") as fh:
                while fh.read(1 << 20):
                    pass
    run_threads(one, qs, 1, args.seconds)  # unmeasured: the first pass over a large index is slower
    runs = [run_threads(one, qs, t, args.seconds) for t in args.threads]
    return {"runs": runs, "hwm_kib": memory_kib().get("VmHWM", 0)}


def _baseline(args: argparse.Namespace) -> dict[str, object]:
    from bench.baseline import CHUNK_CHARS_ALL, SOURCE, Bm25sBaseline, as_chunk_documents

    docs = list(as_chunk_documents(documents(args.chunks, load_pool())))
    started = time.perf_counter()
    base = Bm25sBaseline(docs, chunk_chars=CHUNK_CHARS_ALL)
    took = time.perf_counter() - started
    qs = queries()
    for q in qs[:50]:
        base.search(q, SEARCH_LIMIT)
    runs = [run_threads(lambda q: base.search(q, SEARCH_LIMIT), qs, t, args.seconds) for t in args.threads]
    return {"source": SOURCE, "chunks": len(docs), "build_seconds": took, "chunks_per_s": len(docs) / took,
            "runs": runs, "hwm_kib": memory_kib().get("VmHWM", 0)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.phases")
    sub = p.add_subparsers(dest="phase", required=True)
    i = sub.add_parser("index")
    i.add_argument("--dir", required=True)
    i.add_argument("--index", required=True)
    what = i.add_mutually_exclusive_group(required=True)
    what.add_argument("--chunks", type=int, help="the scaled corpus of exactly this many chunks")
    what.add_argument("--corpus", choices=("cmrc2018", "tidb-docs-cn"), help="one real corpus")
    i.add_argument("--limit", type=int, default=None, help="with --corpus: its first N documents only")
    i.add_argument("--huge-chunks", type=int, default=0, help="with --corpus: add one document of N chunks")
    i.set_defaults(func=_index)
    m = sub.add_parser("minimal-index")
    m.add_argument("--dir", required=True)
    m.add_argument("--index", required=True)
    m.add_argument("--corpus", required=True, choices=("cmrc2018", "tidb-docs-cn"))
    m.add_argument("--limit", type=int, default=None, help="its first N documents only")
    m.set_defaults(func=_minimal_index)
    for name, func in (("search", _search), ("baseline", _baseline)):
        s = sub.add_parser(name)
        s.add_argument("--seconds", type=float, default=3.0)
        s.add_argument("--threads", type=int, nargs="+", default=[1, 2])
        if name == "search":
            s.add_argument("--dir", required=True)
            s.add_argument("--index", required=True)
        else:
            s.add_argument("--chunks", type=int, required=True)
        s.set_defaults(func=func)
    args = p.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
