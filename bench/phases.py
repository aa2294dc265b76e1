"""Measured phases, each run in its own process: `python -m bench.phases PHASE ...`.

Rationale: docs/design-notes.md, "bench/phases.py".
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
from typing import TYPE_CHECKING

from bench.corpus import corpus_documents, documents, huge_document, load_pool, queries
from bench.procfs import memory_kib

if TYPE_CHECKING:
    from indexes.store import IndexStore

__all__ = ["percentile", "run_phase", "run_threads"]

NONE = "none"
"""`--dense none`: the lexical path, named (the gateway config's `dense = "none"`)."""

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
    store = _store(args)
    started = time.perf_counter()
    cpu0 = _cpu_s()
    index = store.create_or_open_for_write(args.index)
    report = index.ingest(docs, delete_missing=False, progress=False)
    took = time.perf_counter() - started
    folder = Path(args.dir) / args.index
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    dense = getattr(index, "last_dense_report", None)  # a hybrid index (indexes.dense)
    extra: dict[str, object] = {"dense": args.dense or "none"}
    if dense is not None:
        extra.update(embedded=dense.embedded, cached=dense.cached + dense.kept, dense_seconds=dense.publish_seconds,
                     dense_bytes=sum(p.stat().st_size for p in (folder / "dense").rglob("*") if p.is_file()))
    index.close()
    return {**extra, "cpu_s": _cpu_s() - cpu0,
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


def _cpu_s() -> float:
    """User + sys CPU seconds of this process and its waited-for children (the analysis pool)."""
    import os

    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _store(args: argparse.Namespace, observe: Callable[[str, str], None] | None = None) -> IndexStore:
    """The index store of a phase: hybrid for `args.index` when `--dense MODEL` names one
    (observe: told of each hybrid search's outcome)."""
    from indexes.store import IndexStore

    if not getattr(args, "dense", None) or args.dense == NONE:
        return IndexStore(Path(args.dir))
    from indexes.dense import DenseConfig, HybridStore

    cache = Path(args.cache_dir).resolve() if getattr(args, "cache_dir", None) else None
    return HybridStore(Path(args.dir), dense={args.index: DenseConfig(provider="local", model=args.dense,
                                                                      cache_dir=cache)}, observe=observe)


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
    from collections import Counter

    from gateway.core.config import Route, Tenant
    from gateway.core.scope import resolve_callback

    outcomes: Counter[str] = Counter()
    index = _store(args, observe=lambda _name, outcome: outcomes.update((outcome,))).open(args.index)
    _wait_for_model(index)
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
    outcomes.clear()
    runs = [run_threads(one, qs, t, args.seconds) for t in args.threads]
    return {"runs": runs, "hwm_kib": memory_kib().get("VmHWM", 0), "dense": args.dense,
            "outcomes": dict(outcomes)}


def _wait_for_model(index: object) -> None:
    """A hybrid index loads its model in the background (answering lexically meanwhile): load
    it here first, so every measured search is a hybrid one. Raises EmbeddingError."""
    embedder = getattr(index, "embedder", None)
    if embedder is not None:
        embedder.warm()
        embedder.embed_query("预热", 5.0)


def _embed(args: argparse.Namespace) -> dict[str, object]:
    from indexes.dense import DenseConfig
    from indexes.dense.providers import make_embedder

    qs = [str(json.loads(line)) for line in Path(args.questions).read_text("utf-8").splitlines() if line.strip()]
    embedder = make_embedder(DenseConfig(provider="local", model=args.model))
    embedder.warm()
    embedder.embed_query("预热", 5.0)
    lat: list[float] = []
    cpu0 = time.process_time()
    for q in qs:
        t0 = time.perf_counter()
        embedder.embed_query(q, 5.0)
        lat.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    lat.sort()
    return {"model": args.model, "questions": len(qs), "cpu_ms_per_query": 1000 * cpu / max(1, len(qs)),
            "p50_ms": percentile(lat, 50) * 1000, "p99_ms": percentile(lat, 99) * 1000}


def _parts(args: argparse.Namespace) -> dict[str, object]:
    from collections import Counter

    from gateway.core.config import Route, Tenant
    from gateway.core.scope import resolve_callback
    from indexes.dense import DenseConfig, HybridStore
    from indexes.dense.providers import make_embedder

    outcomes: Counter[str] = Counter()
    store = HybridStore(Path(args.dir), dense={args.hybrid: DenseConfig(provider="local", model=args.model)},
                        observe=lambda _name, outcome: outcomes.update((outcome,)))
    lexical, hybrid = store.open(args.lexical), store.open(args.hybrid)
    _wait_for_model(hybrid)
    embedder = make_embedder(DenseConfig(provider="local", model=args.model))
    embedder.warm()
    qs = [str(json.loads(line)) for line in Path(args.questions).read_text("utf-8").splitlines() if line.strip()]

    def searcher(index: object, name: str) -> Callable[[str], object]:
        tenant = Tenant("bench", "/volcengine/bench", "enforce", (), (Route("bench", "bench", name),))
        flt = resolve_callback(tenant, "bench", "bench", None).filter
        return lambda q: index.search(q, SEARCH_LIMIT, filter=flt, one_per_document=True,  # type: ignore[attr-defined]
                                      summary_chars=200, content_chars=1500)

    calls = {"lexical": searcher(lexical, args.lexical), "hybrid": searcher(hybrid, args.hybrid),
             "embedding": lambda q: embedder.embed_query(q, 5.0)}
    for q in qs[:20]:  # unmeasured: caches and the first calls' allocations
        calls["lexical"](q + "。")
    outcomes.clear()
    cpu = dict.fromkeys(calls, 0.0)
    order = list(calls)
    for i, q in enumerate(qs):
        for name in order[i % 3:] + order[:i % 3]:
            t0 = time.process_time()
            calls[name](q)
            cpu[name] += time.process_time() - t0
    ms = {f"{k}_ms": 1000 * v / max(1, len(qs)) for k, v in cpu.items()}
    return {"questions": len(qs), **ms, "over_ms": ms["hybrid_ms"] - ms["lexical_ms"] - ms["embedding_ms"],
            "outcomes": dict(outcomes)}


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
    i.add_argument("--dense", default=NONE, help="an embedded model (use-multilingual-v3): build it hybrid")
    i.add_argument("--cache-dir", default=None, help="with --dense: the embedding cache folder (kept between runs)")
    i.set_defaults(func=_index)
    m = sub.add_parser("minimal-index")
    m.add_argument("--dir", required=True)
    m.add_argument("--index", required=True)
    m.add_argument("--corpus", required=True, choices=("cmrc2018", "tidb-docs-cn"))
    m.add_argument("--limit", type=int, default=None, help="its first N documents only")
    m.set_defaults(func=_minimal_index)
    pa = sub.add_parser("parts")
    for flag in ("--dir", "--lexical", "--hybrid", "--model", "--questions"):
        pa.add_argument(flag, required=True)
    pa.set_defaults(func=_parts)
    e = sub.add_parser("embed")
    e.add_argument("--model", required=True)
    e.add_argument("--questions", required=True)
    e.set_defaults(func=_embed)
    for name, func in (("search", _search), ("baseline", _baseline)):
        s = sub.add_parser(name)
        s.add_argument("--seconds", type=float, default=3.0)
        s.add_argument("--threads", type=int, nargs="+", default=[1, 2])
        if name == "search":
            s.add_argument("--dir", required=True)
            s.add_argument("--index", required=True)
            s.add_argument("--dense", default=NONE, help="the embedded model the index was built with (hybrid)")
        else:
            s.add_argument("--chunks", type=int, required=True)
        s.set_defaults(func=func)
    args = p.parse_args(argv)
    print(json.dumps(args.func(args)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
