"""`kbgate eval` / `make eval`: retrieval quality over real signed callbacks, beside a baseline.

For each corpus: build an index with the same ingest as `kbgate index add`, start a real
`kbgate serve` on a free loopback port, send every query of each question set as a signed
Volcengine callback (fresh nonce each, Limit 10) and score the answers:
- MRR@10 by document (Ids' document part; Markdown ids are paths);
- answer-hit@5: an answer string occurs in a returned Summary or KnowledgeContent.
Per question set, and per question style when the set labels its questions (`style`:
colloquial | paraphrase | keyword in tidb-docs-cn/queries.colloquial.jsonl). Beside it, in
the same run, the bm25s + rjieba baseline over 300-character chunks of the same documents
(gateway.ops.evaluation.Bm25sBaseline), the callback latency seen by the client (p50 / p99) and
the server's CPU time per callback (run time of the server's processes and threads, from
/proc schedstat, over the set, divided by its callbacks). Prints one table.

Systems are columns: `lexical` (kbgate as configured by default), `hybrid` (the same index
served hybrid, docs/hybrid-retrieval.md: vectors of the embedded model `--hybrid MODEL`,
default use-multilingual-v3, computed at ingest and kept in `<workdir>/indexes/.embedding-cache`
so only the first run embeds the corpora; `--hybrid none` leaves the column empty) and `bm25s`.
The hybrid server runs with a 2 s query deadline so that every question is answered hybrid
on a busy machine; its callback latency and CPU per callback are columns of their own, so the
cost hybrid adds per callback is read beside the lexical one.

The shared sets (`default_corpora`): cmrc2018, tidb-docs-cn (first 20 questions, colloquial
set), laws-cn dev, and the off-topic set on each documentation and laws route (tidb-docs-cn,
laws-cn): questions no document answers, whose figure is the share answered with any result
(column "answered"; the right answer is none, README "Search quality").

Each run saves its per-question results under `<workdir>/runs/` and prints each set's wins and
losses against the previous saved run, or the one `--against FILE` names (`gateway.ops.eval_runs`):
a ranking change lands only when no set loses more questions than it wins.
"""

from __future__ import annotations

import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import orjson

from gateway.ops import eval_runs
from gateway.ops.cpu import tree_cpu_seconds as _tree_cpu_seconds
from gateway.ops.evaluation import (
    Bm25sBaseline,
    EvalQuery,
    EvalResult,
    QueryScore,
    load_queries,
    score_queries,
    summarize,
)
from gateway.ops.probe import wait_ready
from gateway.volcengine.signing import sign_headers
from indexes.dense import DenseConfig, HybridStore
from indexes.ingest import read_paths
from indexes.types import Document

# The callback refuses these queries by contract (query_empty, query_too_long).
REJECTED_QUERY_RETS = frozenset({40008, 40009})
SHARED_CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"
SYSTEMS = ("lexical", "hybrid", "bm25s")
LIMIT = 10

HYBRID_MODEL = "use-multilingual-v3"
HYBRID_QUERY_TIMEOUT_MS = 2000


def hybrid_settings(model: str) -> DenseConfig:
    """The `hybrid` column's settings: the local `model`, fusion and candidates as configured
    by default, a deadline long enough that no question falls back to lexical."""
    return DenseConfig(provider="local", model=model, query_timeout_ms=HYBRID_QUERY_TIMEOUT_MS)


def hybrid_toml(index: str, dense: DenseConfig) -> str:
    """The `[indexes.<index>.dense]` table serving `dense` (appended to the eval server's config)."""
    return (f'[indexes.{index}.dense]\nprovider = "{dense.provider}"\nmodel = "{dense.model}"\n'
            f"query_timeout_ms = {dense.query_timeout_ms}\n")


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


def parse_corpus(spec: str) -> Corpus:
    """'NAME=DOCS_PATH:QUERIES_FILE' → Corpus with one question set. Raises ValueError for
    another shape."""
    name, sep, rest = spec.partition("=")
    docs, sep2, queries = rest.rpartition(":")
    if not sep or not sep2 or not name:
        raise ValueError(f"--corpus {spec!r}: expected NAME=DOCS_PATH:QUERIES_FILE")
    return Corpus(name, Path(docs), (QuerySet(Path(queries).stem, Path(queries)),))


def doc_id_of(result_id: str) -> str:
    """'{doc_id}#{chunk}' or '{doc_id}' → doc_id (the chunk suffix is digits)."""
    head, sep, tail = result_id.rpartition("#")
    return head if sep and tail.isdigit() else result_id


@dataclass
class Row:
    """One line of the table: a question set (whole: `style` '') or one style of it.

    scores: system name → figures (a system absent from it was not run). latencies: the
    lexical callbacks' client-side milliseconds. cpu_ms: server CPU milliseconds per
    lexical callback over the whole set (None on style rows). hybrid_latencies / hybrid_cpu_ms:
    the same for the hybrid server (empty / None without a hybrid column).
    """

    corpus: str
    label: str
    style: str
    scores: dict[str, EvalResult] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)
    cpu_ms: float | None = None
    hybrid_latencies: list[float] = field(default_factory=list)
    hybrid_cpu_ms: float | None = None
    offtopic: bool = False

    @property
    def queries(self) -> int:
        return next(iter(self.scores.values())).queries if self.scores else 0

    @property
    def ahead(self) -> bool:
        """lexical beats bm25s on both figures (whole on-topic sets only are judged)."""
        if self.offtopic:
            return True
        ours, theirs = self.scores.get("lexical"), self.scores.get("bm25s")
        return ours is not None and theirs is not None and ours.mrr > theirs.mrr and ours.answer_hit > theirs.answer_hit


def run_eval(corpora: list[str], max_queries: int, workdir: Path, hybrid_model: str | None = HYBRID_MODEL,
             against: Path | None = None, relevance_floor: float | None = None) -> int:
    """Evaluate each corpus; print the table, then the wins and losses per set against
    `against` (a saved run) or the previous saved run in `workdir/runs`, and save this run
    there (module doc). relevance_floor: the servers' search.relevance_floor (None: the
    default), to calibrate it on the shared sets. Returns 0 when lexical is ahead of the baseline on both figures for
    every whole on-topic question set, 1 otherwise, 2 when a corpus or `against` is missing."""
    chosen = [parse_corpus(c) for c in corpora] if corpora else default_corpora()
    for c in chosen:
        missing = [str(p) for p in (c.docs, *(s.path for s in c.sets)) if not p.exists()]
        if missing:
            print(f"kbgate eval: corpus {c.name} not found: {', '.join(missing)}", file=sys.stderr)
            return 2
    if against is not None and not against.is_file():
        print(f"kbgate eval: --against {against}: no such saved run", file=sys.stderr)
        return 2
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    hybrid = hybrid_settings(hybrid_model) if hybrid_model else None
    rows: list[Row] = []
    per_set: dict[str, dict[str, list[QueryScore]]] = {}
    offtopic: set[str] = set()
    for c in chosen:
        got, scores = _evaluate_one(c, max_queries, workdir, hybrid, relevance_floor)
        rows += got
        per_set |= scores
        offtopic |= {f"{c.name}/{qs.label}" for qs in c.sets if qs.offtopic}
    print()
    print(table(rows))
    print(f"\n{sum(r.queries for r in rows if not r.style)} questions in {time.perf_counter() - started:.0f} s; "
          "lexical = kbgate's callback as configured by default, Limit 10, one result per document"
          + (f"; hybrid = the same with [indexes.*.dense] model {hybrid.model}, fusion {hybrid.fusion} "
             f"{hybrid.lexical_weight}/{hybrid.dense_weight}, {hybrid.candidates} candidates." if hybrid else "."))
    runs = workdir / "runs"
    baseline = against or eval_runs.latest(runs)
    if baseline is not None:
        before = eval_runs.load(baseline)
        verdicts = eval_runs.compare(before, per_set, frozenset(offtopic))
        print()
        print(eval_runs.verdicts_table(verdicts, f"{baseline.name} (rev {before.get('rev', '?')})"))
    saved = eval_runs.save(runs, per_set, eval_runs.current_rev())
    print(f"\nper-question results saved to {saved}")
    return 0 if all(r.ahead for r in rows if not r.style) else 1


def _fmt(result: EvalResult | None, attr: str) -> str:
    return "—" if result is None else f"{getattr(result, attr):.4f}"


def table(rows: list[Row]) -> str:
    """Markdown table: per question set (and style), MRR@10 and answer-hit@5 of each system,
    callback latency and server CPU per callback."""
    head = ["corpus", "question set", "queries"]
    head += [f"MRR@10 {s}" for s in SYSTEMS] + [f"answer-hit@5 {s}" for s in SYSTEMS]
    head += [f"answered {s}" for s in SYSTEMS[:2]]
    head += ["callback p50 / p99 ms", "server CPU ms / callback", "hybrid p50 / p99 ms", "hybrid CPU ms / callback"]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for r in rows:
        latency, hybrid_latency = _p50_p99(r.latencies), _p50_p99(r.hybrid_latencies)
        cells = [r.corpus if not r.style else "", r.label if not r.style else f"↳ {r.style}", str(r.queries)]
        if r.offtopic:  # nothing to rank or find: only the share answered means something
            cells += ["—"] * (2 * len(SYSTEMS))
        else:
            cells += [_fmt(r.scores.get(s), "mrr") for s in SYSTEMS]
            cells += [_fmt(r.scores.get(s), "answer_hit") for s in SYSTEMS]
        cells += [_fmt(r.scores.get(s), "answered") for s in SYSTEMS[:2]]
        cells += [latency, "—" if r.cpu_ms is None else f"{r.cpu_ms:.2f}"]
        cells += [hybrid_latency, "—" if r.hybrid_cpu_ms is None else f"{r.hybrid_cpu_ms:.2f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def _p50_p99(latencies: list[float]) -> str:
    lat = sorted(latencies)
    return f"{statistics.median(lat):.1f} / {lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.1f}" if lat else "—"


def _rows(corpus: str, label: str, per_system: dict[str, list[QueryScore]], latencies: list[float],
          cpu_ms: float | None, hybrid: SetResult | None = None, offtopic: bool = False) -> list[Row]:
    """The whole-set row, then one row per style when the set labels its questions."""
    lexical = per_system["lexical"]
    hybrid_latencies = hybrid[1] if hybrid is not None else []
    whole = Row(corpus, label, "", {s: summarize(v) for s, v in per_system.items()}, latencies, cpu_ms,
                hybrid_latencies, hybrid[2] if hybrid is not None else None, offtopic)
    styles = [] if offtopic else list(dict.fromkeys(q.query.style for q in lexical if q.query.style))
    out = [whole]
    for style in styles:
        picked = [i for i, q in enumerate(lexical) if q.query.style == style]
        out.append(Row(corpus, label, style,
                       {s: summarize([v[i] for i in picked]) for s, v in per_system.items()},
                       [latencies[i] for i in picked], None,
                       [hybrid_latencies[i] for i in picked] if hybrid_latencies else []))
    return out


def _evaluate_one(corpus: Corpus, max_queries: int, workdir: Path, hybrid_dense: DenseConfig | None = None,
                  relevance_floor: float | None = None) -> tuple[list[Row], dict[str, dict[str, list[QueryScore]]]]:
    """The corpus's rows, and per set ('<corpus>/<label>') its lexical and hybrid per-question
    scores (`eval_runs.PerSet`)."""
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

    floor = "" if relevance_floor is None else f"relevance_floor = {relevance_floor}\n"
    lexical = _by_callback(corpus, [q for _, q in sets], workdir, search=floor)
    hybrid = (_by_callback(corpus, [q for _, q in sets], workdir, hybrid_toml(corpus.name, hybrid_dense), floor)
              if hybrid_dense else None)
    baseline = Bm25sBaseline(documents, chunk_chars=300)
    rows: list[Row] = []
    per_set: dict[str, dict[str, list[QueryScore]]] = {}
    for i, (qs, queries) in enumerate(sets):
        scores, latencies, cpu_ms = lexical[i]
        per_system = {"lexical": scores,
                      "bm25s": score_queries(lambda q: baseline.search(q, 50), queries)}
        if hybrid is not None:
            per_system["hybrid"] = hybrid[i][0]
        rows += _rows(corpus.name, qs.label, per_system, latencies, cpu_ms, hybrid[i] if hybrid else None,
                      qs.offtopic)
        per_set[f"{corpus.name}/{qs.label}"] = {s: v for s, v in per_system.items() if s != "bm25s"}
    return rows, per_set


SetResult = tuple[list[QueryScore], list[float], float | None]
"""Per question set: per-query scores, per-query callback milliseconds, server CPU ms per callback."""


def _by_callback(corpus: Corpus, sets: Sequence[list[EvalQuery]], workdir: Path,
                 extra_config: str = "", search: str = "") -> list[SetResult]:
    """Serve the corpus's index with `kbgate serve` (config + extra_config; `search`: more
    lines of its [search] table) and score every question set through signed callbacks."""
    secret = secrets.token_urlsafe(24)
    port = _free_port()
    cfg = workdir / f"{corpus.name}.toml"
    (workdir / f"{corpus.name}.secret").write_text(secret)
    cfg.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\n[indexes]\ndir = "indexes"\n[search]\nmax_limit = {LIMIT}\n{search}'
        f'[tenants.eval]\n[[tenants.eval.secrets]]\nid = "eval"\nvalue_file = "{corpus.name}.secret"\n'
        f'[[tenants.eval.routes]]\nfirst_level_id = "eval"\nsecond_level_id = "{corpus.name}"\n'
        f'index = "{corpus.name}"\n' + extra_config
    )
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    rejected: list[str] = []
    out: list[SetResult] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc)
        with httpx.Client(base_url=base, timeout=10.0) as client:
            latencies: list[float] = []

            def via_callback(query: str) -> list[tuple[str, str]]:
                body = orjson.dumps({"FirstLevelId": "eval", "SecondLevelId": corpus.name, "Query": query,
                                     "Limit": LIMIT})
                started = time.perf_counter()
                r = client.post("/volcengine/eval", content=body, headers=sign_headers(secret, body, int(time.time())))
                latencies.append((time.perf_counter() - started) * 1000)
                env = orjson.loads(r.content)
                if env.get("Ret") in REJECTED_QUERY_RETS:
                    rejected.append(query)  # e.g. an empty query in the data: scores 0, as for the baseline
                    return []
                if env.get("Ret") != 0:
                    raise RuntimeError(f"callback failed: Ret={env.get('Ret')} Msg={env.get('Msg')}")
                return [(doc_id_of(i["Id"]), f"{i.get('Summary', '')}\n{i.get('KnowledgeContent', '')}")
                        for i in env["Result"]]

            via_callback("预热")  # the first callback opens the index and loads the analysers
            if extra_config:  # a hybrid server loads its model in the background: wait for it
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:
                    started = time.perf_counter()
                    via_callback("预热模型")
                    if time.perf_counter() - started < HYBRID_QUERY_TIMEOUT_MS / 2000:
                        break
            for queries in sets:
                latencies = []
                cpu_before = _tree_cpu_seconds(proc.pid)
                scores = score_queries(via_callback, queries, mrr_k=10, answer_k=5)
                cpu = _tree_cpu_seconds(proc.pid) - cpu_before
                cpu_ms = cpu * 1000 / len(queries) if queries else None
                out.append((scores, latencies, cpu_ms))
    finally:
        proc.terminate()
        proc.wait(15)
    if rejected:
        print(f"{corpus.name}: {len(rejected)} queries refused by the callback contract (empty or too long); "
              "they score 0 for both systems", file=sys.stderr)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["HYBRID_MODEL", "SYSTEMS", "Corpus", "QuerySet", "Row", "default_corpora", "doc_id_of", "hybrid_settings",
           "hybrid_toml", "parse_corpus", "run_eval", "table"]
