"""`kbgate eval` / `make eval`: retrieval quality over real signed callbacks, beside a baseline.

For each corpus: build an index with the same ingest as `kbgate index add`, start a real
`kbgate serve` on a free loopback port, send every query of `queries.jsonl` as a signed
Volcengine callback (fresh nonce each, Limit 10) and score the answers:
- MRR@10 by document (Ids' document part; Markdown ids are paths);
- answer-hit@5: an answer string occurs in a returned Summary or KnowledgeContent.
Beside it, in the same run, the bm25s + rjieba baseline over 300-character chunks of
the same documents (indexes.evaluation.Bm25sBaseline). Prints one table.
"""

from __future__ import annotations

import os
import secrets
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson

from gateway.ops.probe import wait_ready
from gateway.volcengine.signing import sign_headers
from indexes.evaluation import Bm25sBaseline, EvalQuery, evaluate, load_queries
from indexes.ingest import read_paths
from indexes.store import IndexStore
from indexes.types import Document

# The callback refuses these queries by contract (query_empty, query_too_long).
REJECTED_QUERY_RETS = frozenset({40008, 40009})
SHARED_CORPORA = Path(__file__).resolve().parents[3] / "shared" / "corpora"


@dataclass(frozen=True, slots=True)
class Corpus:
    """name: index/route name; docs: a JSONL file or a folder; queries: queries.jsonl."""

    name: str
    docs: Path
    queries: Path


def default_corpora(root: Path = SHARED_CORPORA) -> list[Corpus]:
    """The two shared corpora (cmrc2018 JSONL passages, tidb-docs-cn Markdown tree)."""
    return [
        Corpus("cmrc2018", root / "cmrc2018" / "docs.jsonl", root / "cmrc2018" / "queries.jsonl"),
        Corpus("tidb-docs-cn", root / "tidb-docs-cn" / "docs", root / "tidb-docs-cn" / "queries.jsonl"),
    ]


def parse_corpus(spec: str) -> Corpus:
    """'NAME=DOCS_PATH:QUERIES_FILE' → Corpus. Raises ValueError for another shape."""
    name, sep, rest = spec.partition("=")
    docs, sep2, queries = rest.rpartition(":")
    if not sep or not sep2 or not name:
        raise ValueError(f"--corpus {spec!r}: expected NAME=DOCS_PATH:QUERIES_FILE")
    return Corpus(name, Path(docs), Path(queries))


def doc_id_of(result_id: str) -> str:
    """'{doc_id}#{chunk}' or '{doc_id}' → doc_id (the chunk suffix is digits)."""
    head, sep, tail = result_id.rpartition("#")
    return head if sep and tail.isdigit() else result_id


@dataclass
class Row:
    corpus: str
    queries: int
    mrr: float
    hit: float
    base_mrr: float
    base_hit: float
    p50_ms: float
    p99_ms: float

    @property
    def ahead(self) -> bool:
        return self.mrr > self.base_mrr and self.hit > self.base_hit


def run_eval(corpora: list[str], max_queries: int, workdir: Path) -> int:
    """Evaluate each corpus; print the table. Returns 0 when ahead of the baseline on both
    figures for every corpus, 1 otherwise, 2 when a corpus is missing."""
    chosen = [parse_corpus(c) for c in corpora] if corpora else default_corpora()
    for c in chosen:
        if not c.docs.exists() or not c.queries.is_file():
            print(f"kbgate eval: corpus {c.name} not found at {c.docs} / {c.queries}", file=sys.stderr)
            return 2
    workdir.mkdir(parents=True, exist_ok=True)
    rows = [_evaluate_one(c, max_queries, workdir) for c in chosen]
    print()
    print(table(rows))
    return 0 if all(r.ahead for r in rows) else 1


def table(rows: list[Row]) -> str:
    """Markdown table of the figures, kbgate beside the baseline."""
    out = [
        "| corpus | queries | kbgate MRR@10 | bm25s MRR@10 | kbgate answer-hit@5 | bm25s answer-hit@5 "
        "| callback p50 / p99 ms | ahead on both |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        out.append(f"| {r.corpus} | {r.queries} | {r.mrr:.4f} | {r.base_mrr:.4f} | {r.hit:.4f} | {r.base_hit:.4f} "
                   f"| {r.p50_ms:.1f} / {r.p99_ms:.1f} | {'yes' if r.ahead else 'NO'} |")
    return "\n".join(out)


def _evaluate_one(corpus: Corpus, max_queries: int, workdir: Path) -> Row:
    queries = load_queries(corpus.queries)
    if max_queries:
        queries = queries[:max_queries]
    documents = [d for d in read_paths([corpus.docs]) if isinstance(d, Document)]
    # Always a fresh index: an index left by older code would keep its old chunks for
    # unchanged documents and measure that code instead of this one.
    shutil.rmtree(workdir / "indexes" / corpus.name, ignore_errors=True)
    store = IndexStore(workdir / "indexes")
    t0 = time.perf_counter()
    report = store.create_or_open_for_write(corpus.name).ingest(documents, delete_missing=True, progress=False)
    print(f"{corpus.name}: {len(documents)} documents, index ready in {time.perf_counter() - t0:.1f} s "
          f"({report.added} added, {report.updated} updated, {report.unchanged} unchanged)", file=sys.stderr)

    secret = secrets.token_urlsafe(24)
    port = _free_port()
    cfg = workdir / f"{corpus.name}.toml"
    (workdir / f"{corpus.name}.secret").write_text(secret)
    cfg.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\n[indexes]\ndir = "indexes"\n[search]\nmax_limit = 10\n'
        f'[tenants.eval]\n[[tenants.eval.secrets]]\nid = "eval"\nvalue_file = "{corpus.name}.secret"\n'
        f'[[tenants.eval.routes]]\nfirst_level_id = "eval"\nsecond_level_id = "{corpus.name}"\n'
        f'index = "{corpus.name}"\n'
    )
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    latencies: list[float] = []
    rejected: list[str] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc)
        with httpx.Client(base_url=base, timeout=10.0) as client:

            def via_callback(query: str) -> list[tuple[str, str]]:
                body = orjson.dumps({"FirstLevelId": "eval", "SecondLevelId": corpus.name, "Query": query,
                                     "Limit": 10})
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

            ours = evaluate(via_callback, queries)
    finally:
        proc.terminate()
        proc.wait(15)
    if rejected:
        print(f"{corpus.name}: {len(rejected)} queries refused by the callback contract (empty or too long); "
              "they score 0 for both systems", file=sys.stderr)
    baseline = Bm25sBaseline(documents, chunk_chars=300)
    theirs = evaluate(lambda q: baseline.search(q, 50), queries)
    latencies.sort()
    return Row(corpus.name, len(queries), ours.mrr, ours.answer_hit, theirs.mrr, theirs.answer_hit,
               statistics.median(latencies), latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


__all__ = ["Corpus", "EvalQuery", "Row", "default_corpora", "doc_id_of", "parse_corpus", "run_eval", "table"]
