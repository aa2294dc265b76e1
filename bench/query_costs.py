"""Where one search spends its time: `python -m bench.costs queries [--against TREE]`.

Rationale: docs/design-notes.md, "bench/query_costs.py".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import tantivy

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
STAGES = ("analysis", "query", "tantivy", "loads", "hits", "search")
CALLBACK_EXCLUDED = ("config/**", "state/**")
"""What every Volcengine callback excludes (gateway.scope.ALWAYS_EXCLUDED): the callback's
filter, rebuilt here because the index layer does not import the gateway."""

__all__ = ["CALLBACK_EXCLUDED", "STAGES", "main", "measure"]


def _corpus(name: str) -> tuple[Path, list[Path]]:
    if name == "tidb-docs-cn":
        root = CORPORA / "tidb-docs-cn"
        return root / "docs", [root / "queries.jsonl", root / "queries.colloquial.jsonl"]
    if name == "cmrc2018":
        root = CORPORA / "cmrc2018"
        return root / "docs.jsonl", [root / "queries.jsonl"]
    raise SystemExit(f"unknown corpus {name!r}: tidb-docs-cn or cmrc2018")


def _questions(path: Path) -> list[str]:
    """The `query` of each JSON line of a question file (indexes/ imports no gateway module)."""
    with path.open(encoding="utf-8") as fh:
        return [str(json.loads(line)["query"]) for line in fh if line.strip()]


def measure(corpus: str, limit: int, passes: int, max_queries: int) -> dict[str, float]:
    """Index `corpus` in a temporary folder and time each stage: microseconds per query (the
    fastest of `passes` passes, stage by stage: on a shared machine the least disturbed pass
    is the best estimate of the work), plus 'loads_per_query' and 'searches_per_query'."""
    from indexes.analysis import query_terms
    from indexes.hits import collapse, make_hit
    from indexes.ingest import read_paths
    from indexes.search import build_query
    from indexes.store import IndexStore, KnowledgeIndex
    from indexes.types import DEFAULT_BOUNDS, Document, SearchFilter

    docs_path, query_files = _corpus(corpus)
    queries = [q for f in query_files for q in _questions(f) if q.strip()][:max_queries]
    flt = SearchFilter(exclude_path_globs=CALLBACK_EXCLUDED)
    with tempfile.TemporaryDirectory() as tmp:
        store = IndexStore(Path(tmp))
        store.create_or_open_for_write(corpus).ingest(
            [d for d in read_paths([docs_path]) if isinstance(d, Document)], progress=False, workers=1)
        ki = store.open(corpus)
        assert isinstance(ki, KnowledgeIndex)  # a Tantivy index: its parts are measured here
        searcher = ki._index.searcher()
        schema = ki._schema
        filters = ki._filter_parts(flt)
        bounds = getattr(ki, "bounds", DEFAULT_BOUNDS)
        counts = {"loads": 0, "searches": 0}
        clock = time.thread_time  # CPU of this thread: a busy shared machine inflates wall time, not this
        loading = [0.0]

        def timed_loads(addresses: Sequence[tantivy.DocAddress]) -> Iterator[tantivy.Document]:
            for a in addresses:
                t0 = clock()
                doc = searcher.doc(a)
                loading[0] += clock() - t0
                counts["loads"] += 1
                yield doc

        def one_pass() -> dict[str, float]:
            spent = dict.fromkeys(STAGES, 0.0)
            for q in queries:
                t0 = clock()
                terms = query_terms(q)
                t1 = clock()
                built = build_query(schema, terms, searcher, flt, ki.boosts, filters=filters,
                                    doc_freqs=ki._doc_freqs)
                t2 = clock()
                spent["analysis"] += t1 - t0
                spent["query"] += t2 - t1
                if built is None:
                    continue
                found = collapse(searcher, schema, built, limit, bounds)
                t3 = clock()
                spent["tantivy"] += t3 - t2
                loading[0] = 0.0
                for c in found:
                    best = next(timed_loads([c.address]))
                    make_hit(c.score, best, terms, 200, 1500, timed_loads(c.more))
                t4 = clock()
                spent["loads"] += loading[0]
                spent["hits"] += t4 - t3 - loading[0]
                t5 = clock()
                ki.search(q, limit, filter=flt)
                spent["search"] += clock() - t5
            return {k: v * 1e6 / len(queries) for k, v in spent.items()}

        one_pass()  # warm: page cache, analysers, document frequencies
        counts["loads"] = 0
        runs = [one_pass() for _ in range(passes)]
        out = {k: min(r[k] for r in runs) for k in STAGES}
        out["loads_per_query"] = counts["loads"] / (passes * len(queries))
        searches = [0]
        original = searcher.search

        class Counting:
            def search(self, *args: object, **kw: object) -> object:
                searches[0] += 1
                return original(*args, **kw)  # type: ignore[arg-type]

            def __getattr__(self, name: str) -> object:
                return getattr(searcher, name)

        for q in queries:
            terms = query_terms(q)
            built = build_query(schema, terms, searcher, flt, ki.boosts, filters=filters, doc_freqs=ki._doc_freqs)
            if built is not None:
                collapse(Counting(), schema, built, limit, bounds)  # type: ignore[arg-type]
        out["searches_per_query"] = searches[0] / len(queries)
        out["queries"] = len(queries)
        return out


def _run_tree(tree: Path, args: argparse.Namespace) -> dict[str, float]:
    """This program's `--json` measurement with `tree`'s indexes package, in a subprocess: this
    file is loaded by path, and its `indexes.*` imports resolve to `tree` (first on PYTHONPATH)."""
    code = ("import importlib.util, os, sys; "
            "spec = importlib.util.spec_from_file_location('kbgate_query_costs', os.environ['KBGATE_QUERY_COSTS']); "
            "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); "
            "sys.exit(m.main(sys.argv[1:]))")
    env = {**os.environ, "PYTHONPATH": str(tree), "KBGATE_QUERY_COSTS": str(Path(__file__).resolve())}
    proc = subprocess.run([sys.executable, "-c", code, "--json", "--corpus", args.corpus,
                           "--limit", str(args.limit), "--passes", str(args.passes),
                           "--max-queries", str(args.max_queries)],
                          capture_output=True, text=True, env=env, cwd=str(tree), check=False)
    if proc.returncode != 0:
        raise SystemExit(f"measuring {tree} failed:\n{proc.stderr[-2000:]}")
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table (or one JSON object with --json); returns 0."""
    p = argparse.ArgumentParser(prog="python -m bench.costs queries", description=__doc__.split("\n")[0])
    p.add_argument("--corpus", default="tidb-docs-cn", help="tidb-docs-cn (default) or cmrc2018")
    p.add_argument("--limit", type=int, default=5, help="results per query (the callback's default Limit)")
    p.add_argument("--passes", type=int, default=7, help="timed passes over the questions (fastest kept)")
    p.add_argument("--max-queries", type=int, default=500)
    p.add_argument("--against", type=Path, help="another checkout: measure it too, alternating")
    p.add_argument("--rounds", type=int, default=3, help="with --against: alternating runs per tree")
    p.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.json:
        print(json.dumps(measure(args.corpus, args.limit, args.passes, args.max_queries)))
        return 0
    here = Path(__file__).resolve().parents[1]
    trees = [("this tree", here)] + ([(str(args.against), args.against.resolve())] if args.against else [])
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for r in range(args.rounds if args.against else 1):
        for label, tree in (trees if r % 2 == 0 else trees[::-1]):
            results[label].append(_run_tree(tree, args))
    first = results[trees[0][0]][0]
    print(f"{args.corpus}: {int(first['queries'])} real questions, Limit {args.limit}, the callback's scope "
          f"filter; microseconds of one thread per query, fastest of {args.passes} passes"
          + (f", median of {args.rounds} alternating runs per tree" if args.against else ""))
    print()
    head = "| stage | " + " | ".join(label for label, _ in trees) + (" | ratio |" if args.against else " |")
    print(head)
    print("|---" + "|---:" * (len(trees) + (1 if args.against else 0)) + "|")
    for key in (*STAGES, "loads_per_query", "searches_per_query"):
        values = [statistics.median(run[key] for run in results[label]) for label, _ in trees]
        cells = [f"{v:,.0f}" if key in STAGES else f"{v:.1f}" for v in values]
        ratio = f" | {values[0] / values[1]:.2f}" if args.against and values[1] else (" | -" if args.against else "")
        name = {"loads_per_query": "stored chunks loaded per query",
                "searches_per_query": "Tantivy searches per query"}.get(key, key)
        print(f"| {name} | " + " | ".join(cells) + ratio + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
