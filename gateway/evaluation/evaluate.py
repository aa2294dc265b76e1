"""`kbgate eval` / `make eval`: retrieval quality over real signed callbacks, beside a baseline.

Rationale: docs/design-notes.md, "gateway/evaluation/evaluate.py".
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gateway.evaluation import eval_runs
from gateway.evaluation.eval_build import build_cost
from gateway.evaluation.eval_serve import READY_SECONDS, Standin, by_callback, doc_id_of
from gateway.evaluation.eval_serve import standin as _standin
from gateway.evaluation.eval_table import (
    SERVED,
    SYSTEMS,
    Row,
    Served,
    costs_table,
    fallbacks_table,
    rows,
    summaries_table,
    table,
)
from gateway.evaluation.evaluation import Bm25sBaseline, EvalQuery, QueryScore, load_queries, score_queries
from indexes.dense import DenseConfig, HybridStore
from indexes.ingest import read_paths
from indexes.types import Document

SHARED_CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"
LIMIT = 10

HYBRID_MODEL = "use-multilingual-v3"
HYBRID_QUERY_TIMEOUT_MS = 10_000
"""The hybrid column's query-embedding deadline: the most `query_timeout_ms` accepts, so that
no question falls back to lexical on a loaded machine (the run counts any that do)."""


def hybrid_settings(model: str) -> DenseConfig:
    """The `hybrid` column's settings: the local `model`, fusion and candidates as configured
    by default, a deadline long enough that no question falls back to lexical on a busy machine,
    and a breaker that a few late answers do not open (the run counts searches that fell back)."""
    return DenseConfig(provider="local", model=model, query_timeout_ms=HYBRID_QUERY_TIMEOUT_MS, breaker_failures=100)


def hybrid_toml(index: str, dense: DenseConfig) -> str:
    """The `[indexes.<index>.dense]` table serving `dense` (appended to the eval server's config)."""
    return (f'[indexes.{index}.dense]\nprovider = "{dense.provider}"\nmodel = "{dense.model}"\n'
            f"query_timeout_ms = {dense.query_timeout_ms}\nbreaker_failures = {dense.breaker_failures}\n")


RERANK_CANDIDATES = 20
RERANK_TIMEOUT_MS = 10_000
"""The rerank column's deadline: the most `timeout_ms` accepts (the stand-in embeds 20 chunks per
question, seconds on a loaded machine); with a breaker that late answers do not open."""


def lexical_toml(index: str) -> str:
    """`[indexes.<index>] dense = "none"`: the lexical and rerank columns serve the index lexically
    (a new index is hybrid by default, and the eval's one index holds the hybrid column's vectors)."""
    return f'[indexes.{index}]\ndense = "none"\n'


def rerank_toml(index: str, url: str) -> str:
    """The `[indexes.<index>.rerank]` table of the rerank column: the Cohere wire format to the
    stand-in reranker at `url` (`gateway.evaluation.rerank_standin`), the default 20 candidates, a
    deadline long enough that no question falls back on a busy machine."""
    return (f'[indexes.{index}.rerank]\nprovider = "cohere"\nurl = "{url}/v1/rerank"\nmodel = "stand-in"\n'
            f"candidates = {RERANK_CANDIDATES}\ntimeout_ms = {RERANK_TIMEOUT_MS}\nbreaker_failures = 100\n")


OFFTOPIC_LABEL = "off-topic"


@dataclass(frozen=True, slots=True)
class QuerySet:
    """One question file of a corpus. first: only its first N questions (0 = all). offtopic:
    questions no document answers (judged by the share answered with any result)."""

    label: str
    path: Path
    first: int = 0
    offtopic: bool = False


@dataclass(frozen=True, slots=True)
class Corpus:
    """name: index/route name; docs: a JSONL file or a folder; sets: its question files."""

    name: str
    docs: Path
    sets: tuple[QuerySet, ...]


def default_corpora(root: Path = SHARED_CORPORA) -> list[Corpus]:
    """The shared corpora: cmrc2018 (JSONL passages, every question), tidb-docs-cn (Markdown
    tree: the first 20 questions of queries.jsonl, and the colloquial set) and laws-cn (Markdown
    tree: the dev set), the last two also with the off-topic set (module doc)."""
    tidb, laws = root / "tidb-docs-cn", root / "laws-cn"
    offtopic = QuerySet(OFFTOPIC_LABEL, root / "offtopic" / "queries.dev.jsonl", offtopic=True)
    return [
        Corpus("cmrc2018", root / "cmrc2018" / "docs.jsonl",
               (QuerySet("questions", root / "cmrc2018" / "queries.jsonl"),)),
        Corpus("tidb-docs-cn", tidb / "docs",
               (QuerySet("first 20 questions", tidb / "queries.jsonl", first=20),
                QuerySet("colloquial set", tidb / "queries.colloquial.jsonl"), offtopic)),
        Corpus("laws-cn", laws / "docs", (QuerySet("dev set", laws / "queries.dev.jsonl"), offtopic)),
    ]


def present_corpora(corpora: Sequence[str]) -> list[Corpus] | None:
    """The corpora named (NAME=DOCS:SETS…; none: the shared ones), or None after saying on stderr
    which files of one are missing."""
    chosen = [parse_corpus(c) for c in corpora] if corpora else default_corpora()
    for c in chosen:
        missing = [str(p) for p in (c.docs, *(s.path for s in c.sets)) if not p.exists()]
        if missing:
            print(f"kbgate eval: corpus {c.name} not found: {', '.join(missing)}", file=sys.stderr)
            return None
    return chosen


def parse_corpus(spec: str) -> Corpus:
    """'NAME=DOCS_PATH:QUERIES_FILE' → Corpus with one question set. Raises ValueError for
    another shape."""
    name, sep, rest = spec.partition("=")
    docs, sep2, queries = rest.rpartition(":")
    if not sep or not sep2 or not name:
        raise ValueError(f"--corpus {spec!r}: expected NAME=DOCS_PATH:QUERIES_FILE")
    return Corpus(name, Path(docs), (QuerySet(Path(queries).stem, Path(queries)),))


def run_eval(corpora: list[str], max_queries: int, workdir: Path, hybrid_model: str | None = HYBRID_MODEL,
             against: Path | None = None, relevance_floor: float | None = None, rerank: bool = True,
             ready_seconds: float = READY_SECONDS) -> int:
    """Evaluate each corpus; print the quality table, the costs table and the hybrid build cost,
    then the wins and losses per set against `against` (a saved run) or the previous saved run in
    `workdir/runs`, and save this run there (module doc). relevance_floor: the servers'
    search.relevance_floor (None: the default), to calibrate it. rerank: run the rerank column
    (the stand-in reranker, `gateway.evaluation.rerank_standin`). ready_seconds: the wait for a
    started server, the stand-in or a hybrid server's model (`eval_serve`). Returns 0 when lexical is ahead of the
    baseline on both figures for every whole on-topic question set, 1 otherwise, 2 when a corpus
    or `against` is missing."""
    chosen = present_corpora(corpora)
    if chosen is None:
        return 2
    if against is not None and not against.is_file():
        print(f"kbgate eval: --against {against}: no such saved run", file=sys.stderr)
        return 2
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    hybrid = hybrid_settings(hybrid_model) if hybrid_model else None
    got: list[Row] = []
    per_set: dict[str, dict[str, list[QueryScore]]] = {}
    offtopic: set[str] = set()
    builds: list[tuple[str, float, int]] = []
    with _standin(rerank, ready_seconds) as reranker:
        for c in chosen:
            corpus_rows, scores, build = _evaluate_one(c, max_queries, workdir, hybrid, relevance_floor, reranker,
                                                       ready_seconds)
            got += corpus_rows
            per_set |= scores
            builds += [build] if build is not None else []
            offtopic |= {f"{c.name}/{qs.label}" for qs in c.sets if qs.offtopic}
    print()
    print(table(got))
    print(f"\n{sum(r.queries for r in got if not r.style)} questions in {time.perf_counter() - started:.0f} s; "
          "lexical = kbgate's callback as configured by default, Limit 10, one result per document"
          + (f"; hybrid = the same with [indexes.*.dense] model {hybrid.model}, fusion {hybrid.fusion} "
             f"{hybrid.lexical_weight}/{hybrid.dense_weight}, {hybrid.candidates} candidates" if hybrid else "")
          + (f"; rerank = lexical with [indexes.*.rerank] over {RERANK_CANDIDATES} candidates, served by a "
             "STAND-IN reranker (the embedded model's cosine over the Cohere wire format: it measures the "
             "stage's wiring and costs, not a real reranker's quality)." if rerank else "."))
    print()
    print("What the agent's model reads (Limit 10; the first 5 results' Summaries):")
    print()
    print(summaries_table(got))
    print()
    print(costs_table(got))
    for name, cpu_s, chunks in builds:
        print(f"hybrid build, {name}: {cpu_s * 1000 / chunks:.1f} CPU-s per 1,000 chunks to embed "
              f"({hybrid.model if hybrid else '?'}, measured on {chunks} chunks, one thread)")
    fell = {f"{r.corpus}/{r.label}": r.fallbacks for r in got if not r.style}
    print()
    print(fallbacks_table(got))
    runs = workdir / "runs"
    baseline = against or eval_runs.latest(runs)
    if baseline is not None:
        before = eval_runs.load(baseline)
        verdicts = eval_runs.compare(before, per_set, frozenset(offtopic))
        print()
        print(eval_runs.verdicts_table(verdicts, f"{baseline.name} (rev {before.get('rev', '?')})"))
        summary_verdicts = eval_runs.compare(before, per_set, frozenset(offtopic), summaries=True)
        if summary_verdicts:
            print()
            print(eval_runs.verdicts_table(summary_verdicts, f"{baseline.name} (rev {before.get('rev', '?')}), "
                                                             "on the answer in the Summaries"))
        print(eval_runs.fallbacks_note(before, fell))
    saved = eval_runs.save(runs, per_set, eval_runs.current_rev(), fallbacks=fell)
    print(f"\nper-question results saved to {saved}")
    return 0 if all(r.ahead for r in got if not r.style) else 1


BUILD_SAMPLE = 200
"""Chunks embedded to measure the hybrid build cost (`gateway.evaluation.eval_build`)."""


def _evaluate_one(corpus: Corpus, max_queries: int, workdir: Path, hybrid_dense: DenseConfig | None = None,
                  relevance_floor: float | None = None, reranker: Standin | None = None,
                  ready_seconds: float = READY_SECONDS,
                  ) -> tuple[list[Row], dict[str, dict[str, list[QueryScore]]], tuple[str, float, int] | None]:
    """The corpus's rows, per set ('<corpus>/<label>') its served systems' per-question scores
    (`eval_runs.PerSet`), and (corpus, CPU seconds, chunks) of embedding BUILD_SAMPLE of its
    chunks with the hybrid model (None without a hybrid column)."""
    sets: list[tuple[QuerySet, list[EvalQuery]]] = []
    for qs in corpus.sets:
        queries = load_queries(qs.path)
        n = min(x for x in (qs.first, max_queries, len(queries)) if x) if queries else 0
        sets.append((qs, queries[:n]))
    documents = [d for d in read_paths([corpus.docs]) if isinstance(d, Document)]
    # Always a fresh index: an index left by older code would keep its old chunks for
    # unchanged documents and measure that code instead of this one.
    shutil.rmtree(workdir / "indexes" / corpus.name, ignore_errors=True)
    # With a hybrid column, the one index also gets its vectors (the lexical server ignores them).
    store = HybridStore(workdir / "indexes", dense={corpus.name: hybrid_dense} if hybrid_dense else None)
    t0 = time.perf_counter()
    index = store.create_or_open_for_write(corpus.name)
    report = index.ingest(documents, delete_missing=True, progress=False)
    print(f"{corpus.name}: {len(documents)} documents, {report.chunks} chunks, index ready in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    dense_report = getattr(index, "last_dense_report", None)
    if dense_report is not None:
        print(dense_report.line(corpus.name), file=sys.stderr)
    build = None
    if hybrid_dense is not None:
        cpu_s, chunks = build_cost(documents, hybrid_dense, BUILD_SAMPLE)
        build = (corpus.name, cpu_s, chunks) if chunks else None

    floor = "" if relevance_floor is None else f"relevance_floor = {relevance_floor}\n"
    asked = [q for _, q in sets]
    refused: list[str] = []  # every column is asked the same questions: counted and said once, here
    served: dict[str, list[Served]] = {"lexical": by_callback(corpus.name, asked, workdir, refused,
                                                              lexical_toml(corpus.name), search=floor,
                                                              ready_seconds=ready_seconds)}
    if hybrid_dense:
        served["hybrid"] = by_callback(corpus.name, asked, workdir, [], hybrid_toml(corpus.name, hybrid_dense), floor,
                                       stage="hybrid", ready_seconds=ready_seconds)
    if reranker:
        served["rerank"] = by_callback(corpus.name, asked, workdir, [],
                                       lexical_toml(corpus.name) + rerank_toml(corpus.name, reranker[0]), floor,
                                       reranker=reranker, stage="rerank", ready_seconds=ready_seconds)
    if refused:
        print(f"{corpus.name}: {len(refused)} queries refused by the callback contract (empty or too long); "
              "they score 0 for both systems", file=sys.stderr)
    baseline = Bm25sBaseline(documents, chunk_chars=300)
    out: list[Row] = []
    per_set: dict[str, dict[str, list[QueryScore]]] = {}
    for i, (qs, qset) in enumerate(sets):
        mine = {s: served[s][i] for s in SERVED if s in served}
        out += rows(corpus.name, qs.label, mine, score_queries(lambda q: baseline.search(q, 50), qset), qs.offtopic)
        per_set[f"{corpus.name}/{qs.label}"] = {s: v.scores for s, v in mine.items()}
    return out, per_set, build


__all__ = ["HYBRID_MODEL", "SYSTEMS", "Corpus", "QuerySet", "Row", "default_corpora", "doc_id_of", "hybrid_settings",
           "hybrid_toml", "lexical_toml", "parse_corpus", "rerank_toml", "run_eval", "table"]
