"""`python -m bench.vectors`: nearest-neighbour libraries measured for hybrid retrieval.

Rationale: docs/design-notes.md, "bench/vectors.py".
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpora" / "tidb-docs-cn"
M, EF_CONSTRUCTION, K = 16, 128, 50
EF_SEARCH = (64, 128)


def _rss_mib() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def real_vectors(cache_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(chunk vectors, query vectors) of tidb-docs-cn from the local USE model, cached."""
    from indexes.dense.cache import EmbeddingCache, text_key
    from indexes.dense.config import DenseConfig
    from indexes.dense.providers import LocalEmbedder
    from indexes.dense.texts import passage_text
    from indexes.ingest import read_paths
    from indexes.ingest.chunking import DEFAULT_MAX_CHARS, chunk
    from indexes.types import Document

    cfg = DenseConfig(provider="local", model="use-multilingual-v3")
    cache = EmbeddingCache(EmbeddingCache.path_for(cache_dir, cfg.fingerprint))
    embedder = LocalEmbedder(cfg)
    texts = list(dict.fromkeys(
        passage_text(d.title, c.heading, c.text)
        for d in read_paths([CORPUS / "docs"]) if isinstance(d, Document)
        for c in chunk(d, DEFAULT_MAX_CHARS)))
    keys = [text_key(t) for t in texts]
    have = cache.get_many(keys)
    missing = [i for i, k in enumerate(keys) if k not in have]
    if missing:
        print(f"embedding {len(missing)} chunks with use-multilingual-v3 (cached for next time)", file=sys.stderr)
        for s in range(0, len(missing), 256):
            part = missing[s:s + 256]
            vecs = embedder.embed_passages([texts[i] for i in part])
            cache.put_many([(keys[i], v) for i, v in zip(part, vecs, strict=True)])
        have = cache.get_many(keys)
    chunks = np.vstack([have[k] for k in keys]).astype(np.float32)
    questions = []
    for name in ("queries.jsonl", "queries.hard.jsonl", "queries.colloquial.jsonl"):
        path = CORPUS / name
        if path.is_file():
            questions += [json.loads(line)["query"] for line in path.read_text("utf-8").splitlines() if line.strip()]
    queries = np.vstack([embedder.embed_query(q, 10.0) for q in questions]).astype(np.float32)
    return chunks, queries


def _unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def scaled(chunks: np.ndarray, n: int, seed: int = 7) -> np.ndarray:
    """`chunks` plus synthetic vectors up to n rows (mixtures of two real ones, plus noise)."""
    if n <= len(chunks):
        return chunks[:n]
    rng = np.random.default_rng(seed)
    extra = n - len(chunks)
    a = chunks[rng.integers(0, len(chunks), extra)]
    b = chunks[rng.integers(0, len(chunks), extra)]
    w = rng.uniform(0.55, 0.9, (extra, 1)).astype(np.float32)
    noise = rng.normal(0, 0.02, a.shape).astype(np.float32)
    return np.vstack([chunks, _unit(w * a + (1 - w) * b + noise)])


def with_noise_queries(chunks: np.ndarray, real: np.ndarray, total: int = 1000, seed: int = 11) -> np.ndarray:
    rng = np.random.default_rng(seed)
    extra = max(0, total - len(real))
    picked = chunks[rng.integers(0, len(chunks), extra)]
    return np.vstack([real, _unit(picked + rng.normal(0, 0.03, picked.shape).astype(np.float32))])


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ data.T
    return np.argsort(-scores, axis=1)[:, :k]


def _measure(lib: str, data_path: str, query_path: str, truth_path: str, out: Any) -> None:
    """Runs in a fresh process: build, save, load, query; puts a dict on `out`."""
    data = np.load(data_path)
    queries = np.load(query_path)
    truth = np.load(truth_path)
    n, dim = data.shape
    labels = np.arange(n, dtype=np.uint64)
    rss0 = _rss_mib()
    folder = tempfile.mkdtemp(prefix="kbgate-vec-")
    t0 = time.perf_counter()
    if lib == "exact":
        index: Any = data
    elif lib == "usearch":
        from usearch.index import Index

        index = Index(ndim=dim, metric="cos", dtype="f32", connectivity=M, expansion_add=EF_CONSTRUCTION)
        index.add(labels, data, threads=1)
    elif lib == "hnswlib":
        import hnswlib

        index = hnswlib.Index(space="ip", dim=dim)
        index.init_index(max_elements=n, ef_construction=EF_CONSTRUCTION, M=M)
        index.set_num_threads(1)
        index.add_items(data, labels.astype(np.int64))
    else:
        import faiss

        faiss.omp_set_num_threads(1)
        index = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = EF_CONSTRUCTION
        index.add(data)
    build = time.perf_counter() - t0
    rss_built = _rss_mib() - rss0
    path = os.path.join(folder, "index")
    t0 = time.perf_counter()
    if lib == "exact":
        np.save(path + ".npy", data)
        path += ".npy"
        loaded: Any = np.load(path, mmap_mode="r")
    elif lib == "usearch":
        from usearch.index import Index

        index.save(path)
        loaded = Index.restore(path, view=True)
    elif lib == "hnswlib":
        import hnswlib

        index.save_index(path)
        loaded = hnswlib.Index(space="ip", dim=dim)
        loaded.load_index(path, max_elements=n)
        loaded.set_num_threads(1)
    else:
        import faiss

        faiss.write_index(index, path)
        loaded = faiss.read_index(path, faiss.IO_FLAG_MMAP)
    load_s = time.perf_counter() - t0 - 0.0
    size = os.path.getsize(path) / 2**20
    result: dict[str, Any] = {"lib": lib, "n": n, "build_s": build, "rss_mib": rss_built, "file_mib": size,
                              "load_ms": load_s * 1000, "search": {}}
    for ef in EF_SEARCH if lib != "exact" else (0,):
        if lib == "usearch":
            loaded.expansion_search = ef
        elif lib == "hnswlib":
            loaded.set_ef(ef)
        elif lib == "faiss":
            loaded.hnsw.efSearch = ef
        times, found = [], []
        for q in queries:
            t = time.perf_counter()
            if lib == "exact":
                scores = loaded @ q
                top = np.argpartition(-scores, K)[:K]
                ids = top[np.argsort(-scores[top])]
            elif lib == "usearch":
                ids = loaded.search(q, K).keys
            elif lib == "hnswlib":
                ids = loaded.knn_query(q[None, :], k=K)[0][0]
            else:
                ids = loaded.search(q[None, :], K)[1][0]
            times.append((time.perf_counter() - t) * 1000)
            found.append(np.asarray(ids, dtype=np.int64))
        r10 = float(np.mean([len(set(f[:10]) & set(t[:10])) / 10 for f, t in zip(found, truth, strict=True)]))
        r50 = float(np.mean([len(set(f[:K]) & set(t[:K])) / K for f, t in zip(found, truth, strict=True)]))
        times.sort()
        result["search"][ef] = {"p50_ms": statistics.median(times), "p99_ms": times[int(len(times) * 0.99)],
                                "recall10": r10, "recall50": r50}
    out.put(result)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.vectors", description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="13k,100k", help="comma-separated: 13k (the real chunks), 100k, ...")
    ap.add_argument("--libs", default="exact,usearch,hnswlib,faiss")
    ap.add_argument("--cache-dir", default=str(ROOT / ".eval" / "indexes" / ".embedding-cache"))
    args = ap.parse_args(argv)
    if not CORPUS.is_dir():
        print(f"bench.vectors: corpus not found at {CORPUS}", file=sys.stderr)
        return 2
    chunks, real_queries = real_vectors(Path(args.cache_dir))
    work = Path(tempfile.mkdtemp(prefix="kbgate-vecbench-"))
    ctx = multiprocessing.get_context("spawn")
    rows = []
    for size in args.sizes.split(","):
        n = len(chunks) if size == "13k" else int(float(size.rstrip("k")) * 1000)
        data = scaled(chunks, n)
        queries = with_noise_queries(chunks, real_queries)
        truth = exact_top(data, queries, K)
        for name, arr in (("data", data), ("queries", queries), ("truth", truth)):
            np.save(work / f"{name}-{n}.npy", arr)
        for lib in args.libs.split(","):
            out = ctx.Queue()
            p = ctx.Process(target=_measure, args=(lib, str(work / f"data-{n}.npy"), str(work / f"queries-{n}.npy"),
                                                   str(work / f"truth-{n}.npy"), out))
            p.start()
            rows.append(out.get())
            p.join()
            print(f"{lib} {n}: done", file=sys.stderr)
    print(f"\n### Nearest-neighbour libraries (`python -m bench.vectors`), {time.strftime('%Y-%m-%d %H:%M')}\n")
    print(f"{chunks.shape[1]} dims (use-multilingual-v3), HNSW M={M} ef_construction={EF_CONSTRUCTION}, 1 thread, "
          f"k={K}, {len(real_queries)} real + {1000 - len(real_queries)} noisy-chunk queries; "
          f"load average {os.getloadavg()[0]:.2f}\n")
    print("| vectors | library | build s | index RSS MiB | file MiB | load ms | ef | p50 ms | p99 ms "
          "| recall@10 | recall@50 |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        for ef, s in r["search"].items():
            print(f"| {r['n']:,} | {r['lib']} | {r['build_s']:.1f} | {r['rss_mib']:.0f} | {r['file_mib']:.0f} "
                  f"| {r['load_ms']:.1f} | {ef or '-'} | {s['p50_ms']:.3f} | {s['p99_ms']:.3f} "
                  f"| {s['recall10']:.4f} | {s['recall50']:.4f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
