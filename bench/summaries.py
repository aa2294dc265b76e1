"""What the agent's model reads, against the Summary budget: `python -m bench.summaries`.

Rationale: docs/design-notes.md, "bench/summaries.py".
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from gateway.core.config import Route, SearchConfig, Tenant
from gateway.core.retrieve import search_now
from gateway.core.scope import resolve_callback
from gateway.evaluation.evaluate import SHARED_CORPORA
from gateway.evaluation.evaluation import answer_hit_at_k, load_queries, mrr_at_k
from indexes.dense import HybridStore
from indexes.dense.config import default_dense
from indexes.ingest import read_paths
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document

BUDGETS = (200, 300, 400, 500, 520, 600, 800, 1000, 1500)
SETS = {"tidb20": ("tidb-docs-cn", "tidb-docs-cn/queries.jsonl", 20),
        "colloquial": ("tidb-docs-cn", "tidb-docs-cn/queries.colloquial.jsonl", 0),
        "laws": ("laws-cn", "laws-cn/queries.dev.jsonl", 0),
        "cmrc2018": ("cmrc2018", "cmrc2018/queries.jsonl", 400)}
DOCS = {"tidb-docs-cn": "tidb-docs-cn/docs", "laws-cn": "laws-cn/docs", "cmrc2018": "cmrc2018/docs.jsonl"}
LIMIT = 5


def build(workdir: Path, corpus: str, root: Path) -> KnowledgeIndex:
    """The corpus's index under workdir/summaries, built afresh (the embedding cache is kept)."""
    dense = dataclasses.replace(default_dense(), cache_dir=workdir / "indexes" / ".embedding-cache",
                                query_timeout_ms=10_000, breaker_failures=1000)
    store = HybridStore(workdir / "summaries", dense={corpus: dense})
    documents = [d for d in read_paths([root / DOCS[corpus]]) if isinstance(d, Document)]
    store.create_or_open_for_write(corpus).ingest(documents, delete_missing=True, progress=False)
    served = store.open(corpus)
    while not served.model_ready:  # the first question is answered hybrid
        time.sleep(0.1)
    return served


def _fallbacks(index: KnowledgeIndex) -> int:
    dense = getattr(index, "dense", None)  # a HybridIndex's DenseSearch
    return sum(n for k, n in dense.counters.items() if k != "hybrid") if dense is not None else 0


def row(index: KnowledgeIndex, corpus: str, path: Path, first: int, budget: int) -> str:
    tenant = Tenant("bench", "/volcengine/bench", "enforce", (), (Route("bench", "bench", corpus),))
    scope = resolve_callback(tenant, "bench", "bench", None)
    cfg = SearchConfig()
    questions = load_queries(path)[: first or None]
    mrr = hit = in5 = in1 = 0.0
    lengths: list[int] = []
    before = _fallbacks(index)
    for q in questions:
        hits = search_now(index, scope, q.query, LIMIT, summary_chars=budget, content_chars=cfg.content_chars,
                          one_per_document=cfg.one_per_document).hits
        summaries = [" ".join(h.summary.split()) for h in hits]
        mrr += mrr_at_k([h.doc_id for h in hits], q.relevant_ids, LIMIT)
        hit += answer_hit_at_k([f"{s}\n{h.content}" for s, h in zip(summaries, hits, strict=True)], q.answers)
        in5 += answer_hit_at_k(summaries, q.answers)
        in1 += answer_hit_at_k(summaries, q.answers, 1)
        lengths += [len(s) for s in summaries]
    n = max(len(questions), 1)
    fell = _fallbacks(index) - before
    share = in5 / hit if hit else 0.0
    return (f"| {budget} | {mrr / n:.3f} | {hit / n:.3f} | {in5 / n:.3f} | {share:.2f} | {in1 / n:.3f} | "
            f"{statistics.mean(lengths) if lengths else 0:.0f} | {fell} |")


def cost(index: KnowledgeIndex, corpus: str, path: Path, first: int) -> tuple[float, float]:
    """(CPU ms per callback in `passage`, CPU ms per callback of the old 200-character excerpt of
    the same hits' chunks), over the set's questions."""
    import indexes.hits as hits_module
    from indexes.analysis import normalize
    from indexes.search import excerpt
    from indexes.synonyms import analysed

    spent = [0.0, 0.0]
    terms_now: list[object] = [None]
    chosen = hits_module.passage

    def timed(pieces: Any, asked: Any, budget: int) -> str:
        t0 = time.process_time()
        out = chosen(pieces, asked, budget)
        t1 = time.process_time()
        excerpt(pieces[0].text, terms_now[0], 200, folded=pieces[0].fold)  # type: ignore[arg-type]
        spent[0] += t1 - t0
        spent[1] += time.process_time() - t1
        return out

    tenant = Tenant("bench", "/volcengine/bench", "enforce", (), (Route("bench", "bench", corpus),))
    scope = resolve_callback(tenant, "bench", "bench", None)
    cfg = SearchConfig()
    questions = load_queries(path)[: first or None]
    hits_module.passage = timed  # type: ignore[assignment]
    try:
        for q in questions:
            terms_now[0] = analysed(normalize(q.query), index.synonyms)
            search_now(index, scope, q.query, LIMIT, summary_chars=cfg.summary_chars, content_chars=cfg.content_chars,
                       one_per_document=cfg.one_per_document)
    finally:
        hits_module.passage = chosen  # type: ignore[assignment]
    n = max(len(questions), 1)
    return spent[0] * 1000 / n, spent[1] * 1000 / n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.summaries", description=__doc__.split("\n\n")[0])
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--cmrc", type=int, default=400, help="cmrc2018 questions (0: all)")
    p.add_argument("--workdir", default=".eval")
    p.add_argument("--cost", action="store_true", help="time the Summary selection beside the old window")
    args = p.parse_args(argv)
    if not SHARED_CORPORA.is_dir():
        print(f"bench.summaries: {SHARED_CORPORA} is absent", file=sys.stderr)
        return 2
    budgets = [int(b) for b in args.budgets.split(",")]
    opened: dict[str, KnowledgeIndex] = {}
    for label in args.sets.split(","):
        corpus, rel, first = SETS[label]
        first = args.cmrc if label == "cmrc2018" else first
        if corpus not in opened:
            opened[corpus] = build(Path(args.workdir), corpus, SHARED_CORPORA)
        if args.cost:
            lexical = IndexStore(Path(args.workdir) / "summaries").open(corpus)
            for path_name, index in (("lexical", lexical), ("hybrid", opened[corpus])):
                new, old = cost(index, corpus, SHARED_CORPORA / rel, first)
                print(f"{label} {path_name}: Summary selection {new:.3f} ms CPU per callback, the old window "
                      f"{old:.3f} ms, added {new - old:.3f} ms", flush=True)
            continue
        print(f"\n{label} ({first or 'all'} questions, Limit {LIMIT}, hybrid, default settings)\n")
        print("| summary_chars | MRR@5 | answer-hit@5 | in the 5 Summaries | of answer-hit@5 | in the first Summary "
              "| mean Summary chars | answered lexically |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for budget in budgets:
            print(row(opened[corpus], corpus, SHARED_CORPORA / rel, first, budget), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
