"""What one huge document costs a search: `python -m bench.costs [--chunks 35000]`
(`python -m bench.costs queries`: where an ordinary search spends its time, bench.query_costs).

Rationale: docs/design-notes.md, "bench/costs.py".
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import tantivy

from indexes.analysis import query_terms
from indexes.hits import make_hit
from indexes.ingest import chunk, read_paths
from indexes.search import build_query
from indexes.store import IndexStore, KnowledgeIndex
from indexes.types import Document, Hit, Section

__all__ = ["CostFigures", "huge_document_costs", "main"]

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "corpora" / "cmrc2018"


@dataclass(frozen=True, slots=True)
class CostFigures:
    """Milliseconds per search (median, p99) and stored chunks loaded per search (mean)."""

    label: str
    p50_ms: float
    p99_ms: float
    loads: float


def _passages(n: int) -> tuple[list[Document], list[str]]:
    """Documents and queries: cmrc2018 when present, else generated Chinese-like text."""
    docs_file, queries_file = CORPUS / "docs.jsonl", CORPUS / "queries.jsonl"
    if docs_file.is_file() and queries_file.is_file():
        import json

        docs = [d for d in read_paths([docs_file]) if isinstance(d, Document)]
        with queries_file.open(encoding="utf-8") as fh:
            queries = [q for q in (json.loads(line)["query"] for line in fh if line.strip()) if q.strip()]
        return docs, queries[:n]
    import random

    rng = random.Random(7)
    chars = "数据库集群节点副本调度存储事务索引查询配置参数日志备份恢复监控告警版本升级"
    docs = [Document(f"g{i}", f"主题{i}", (Section("", "".join(rng.choices(chars, k=400)) + "。"),))
            for i in range(1000)]
    return docs, ["".join(rng.choices(chars, k=8)) for _ in range(n)]


def _huge(docs: Sequence[Document], chunks: int, chunk_chars: int) -> Document:
    """One document of about `chunks` chunks: the passages' text, repeated."""
    text = "\n".join(d.text for d in docs)
    per_copy = len(chunk(Document("x", "", (Section("", text),)), max_chars=chunk_chars))
    copies, rest = divmod(chunks, max(1, per_copy))
    body = "\n".join([text] * copies + [text[: len(text) * rest // max(1, per_copy)]])
    return Document("huge.md", "超大文档", (Section("", body),))


class _Counting:
    """A searcher that counts stored-document loads."""

    def __init__(self, searcher: tantivy.Searcher) -> None:
        self.searcher, self.loads = searcher, 0

    def doc(self, address: tantivy.DocAddress) -> tantivy.Document:
        self.loads += 1
        return self.searcher.doc(address)

    def __getattr__(self, name: str) -> object:
        return getattr(self.searcher, name)


def _former_search(ki: KnowledgeIndex, searcher: _Counting, query: str, limit: int) -> list[Hit]:
    """The collapse before schema 3: load every hit until `limit` documents are seen."""
    terms = query_terms(query)
    q = build_query(ki._schema, terms, searcher.searcher)
    if q is None:
        return []
    fetch = limit * 4
    while True:
        found = searcher.searcher.search(q, fetch).hits
        picked: list[tuple[float, tantivy.Document]] = []
        more: dict[str, list[tantivy.Document]] = {}
        for score, address in found:
            doc = searcher.doc(address)
            doc_id = str(doc.get_first("doc_id"))
            if doc_id in more:
                more[doc_id].append(doc)
                continue
            more[doc_id] = []
            if len(picked) < limit:
                picked.append((score, doc))
        if len(picked) == limit or len(found) < fetch or fetch >= 10_000:
            break
        fetch *= 4
    return [make_hit(s, d, terms, 200, 1500, more[str(d.get_first("doc_id"))]) for s, d in picked]


def _time(label: str, queries: Sequence[str], run: Callable[[str], object],
          count_loads: Callable[[str], int]) -> CostFigures:
    """Time `run` per query; then count the stored loads of each query in a second pass."""
    times: list[float] = []
    for q in queries:
        started = time.perf_counter()
        run(q)
        times.append((time.perf_counter() - started) * 1000)
    loads = sum(count_loads(q) for q in queries)
    times.sort()
    return CostFigures(label, statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.99))],
                       loads / max(1, len(queries)))


class _Swap:
    """An Index whose searcher() is a given counting searcher (to count `search`'s loads)."""

    def __init__(self, index: tantivy.Index, searcher: _Counting) -> None:
        self.index, self._searcher = index, searcher

    def searcher(self) -> _Counting:
        return self._searcher

    def __getattr__(self, name: str) -> object:
        return getattr(self.index, name)


def _loads_of_search(ki: KnowledgeIndex, query: str) -> int:
    index = ki._index
    counting = _Counting(index.searcher())
    ki._index = _Swap(index, counting)  # type: ignore[assignment]
    try:
        ki.search(query, 10)
    finally:
        ki._index = index
    return counting.loads


def _ours(ki: KnowledgeIndex, query: str) -> list[Hit]:
    return ki.search(query, 10)


def _former(ki: KnowledgeIndex, query: str) -> list[Hit]:
    return _former_search(ki, _Counting(ki._index.searcher()), query, 10)


def _loads_of_former(ki: KnowledgeIndex, query: str) -> int:
    counting = _Counting(ki._index.searcher())
    _former_search(ki, counting, query, 10)
    return counting.loads


def huge_document_costs(chunks: int = 35_000, queries: int = 200, workdir: Path | None = None) -> list[CostFigures]:
    """Build both indexes under `workdir` (a temporary folder by default) and time them.

    Returns figures for kbgate's search and the former collapse, on the normal index and on
    the index with the huge document (in that order). Tantivy and I/O errors propagate.
    """
    docs, qs = _passages(queries)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        store = IndexStore(Path(tmp))
        normal = store.create_or_open_for_write("normal")
        assert isinstance(normal, KnowledgeIndex)  # a Tantivy index: its collapse is measured here
        normal.ingest(docs, progress=False)
        huge = _huge(docs, chunks, normal.chunk_chars)
        big = store.create_or_open_for_write("huge")
        assert isinstance(big, KnowledgeIndex)
        started = time.perf_counter()
        report = big.ingest([*docs, huge], progress=False)
        print(f"huge document: {report.chunks - normal.stats().chunks} chunks, index built in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
        out: list[CostFigures] = []
        for label, ki in (("normal index", normal), (f"with a {chunks}-chunk document", big)):
            for q in qs[:20]:  # warm the page cache and the analysis caches
                ki.search(q, 10)
            out.append(_time(f"{label}: kbgate", qs, partial(_ours, ki), partial(_loads_of_search, ki)))
            out.append(_time(f"{label}: former collapse", qs, partial(_former, ki), partial(_loads_of_former, ki)))
        return out


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table; returns 0. `python -m bench.costs queries ...` runs
    `bench.query_costs` instead (the stages of an ordinary search)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["queries"]:
        from bench.query_costs import main as queries_main

        return queries_main(argv[1:])
    p = argparse.ArgumentParser(prog="python -m bench.costs", description=__doc__.split("\n")[0],
                                epilog="python -m bench.costs queries --help: the stages of an ordinary search")
    p.add_argument("--chunks", type=int, default=35_000, help="chunks of the huge document")
    p.add_argument("--queries", type=int, default=200)
    args = p.parse_args(argv)
    figures = huge_document_costs(args.chunks, args.queries)
    print("| search | p50 ms | p99 ms | stored chunks loaded per search |")
    print("|---|---:|---:|---:|")
    for f in figures:
        print(f"| {f.label} | {f.p50_ms:.2f} | {f.p99_ms:.2f} | {f.loads:.1f} |")
    ours_normal, ours_huge = figures[0], figures[2]
    print(f"\nkbgate: a search matching the huge document costs {ours_huge.p50_ms / ours_normal.p50_ms:.2f}x "
          f"(median) and {ours_huge.p99_ms / ours_normal.p99_ms:.2f}x (p99) a normal one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
