"""`kbgate eval --milvus URI`: the shared sets on an index served by Milvus against the same
pages in a Tantivy folder (docs/scaling.md, "3. One index past one machine": parity).

Rationale: docs/design-notes.md, "gateway/evaluation/backends.py".
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

from gateway.core.config.model import DEFAULT_RELEVANCE_FLOOR, SUMMARY_CHARS
from gateway.evaluation.eval_serve import LIMIT, doc_id_of
from gateway.evaluation.evaluate import Corpus, present_corpora
from gateway.evaluation.evaluation import QueryScore, load_queries, score_queries, summarize
from gateway.ops.processes import free_port, listening, stop, wait_until
from indexes.ingest import read_paths
from indexes.store import IndexStore
from indexes.types import Document, MilvusConfig, ServedIndex

__all__ = ["run_parity"]

CONTENT_CHARS = 1500


def _ranked(idx: ServedIndex, query: str) -> list[tuple[str, str, str]]:
    hits = idx.search(query, LIMIT, floor=DEFAULT_RELEVANCE_FLOOR, summary_chars=SUMMARY_CHARS,
                      content_chars=CONTENT_CHARS)
    return [(doc_id_of(h.id), f"{h.summary}\n{h.content}", h.summary) for h in hits]


def _line(label: str, t: list[QueryScore], m: list[QueryScore], offtopic: bool) -> str:
    a, b = summarize(t), summarize(m)
    if offtopic:
        answered_t = sum(1 for s in t if s.results) / max(len(t), 1)
        answered_m = sum(1 for s in m if s.results) / max(len(m), 1)
        return f"  {label:<22} {len(t):>5}  answered  tantivy {answered_t:.4f}  milvus {answered_m:.4f}"
    wins = sum(1 for x, y in zip(t, m, strict=True) if y.mrr > x.mrr)
    losses = sum(1 for x, y in zip(t, m, strict=True) if y.mrr < x.mrr)
    return (f"  {label:<22} {len(t):>5}  MRR@10 tantivy {a.mrr:.4f} milvus {b.mrr:.4f} ({b.mrr - a.mrr:+.4f})  "
            f"hit@5 tantivy {a.answer_hit:.4f} milvus {b.answer_hit:.4f} ({b.answer_hit - a.answer_hit:+.4f})  "
            f"milvus wins {wins} loses {losses}")


def _one(corpus: Corpus, max_queries: int, workdir: Path, uri: str) -> list[str]:
    documents = [d for d in read_paths([corpus.docs]) if isinstance(d, Document)]
    collection = f"eval_{uuid.uuid4().hex[:12]}"
    tantivy = IndexStore(workdir / "tantivy")
    milvus = IndexStore(workdir / "milvus", remote={corpus.name: MilvusConfig(uri, collection, timeout_seconds=60)})
    out = [f"{corpus.name}: {len(documents)} documents"]
    try:
        for label, store in (("tantivy", tantivy), ("milvus", milvus)):
            started = time.perf_counter()
            report = store.create_or_open_for_write(corpus.name).ingest(documents, progress=False, workers=1)
            print(f"{corpus.name} on {label}: {report.chunks} chunks in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
        t, m = tantivy.open(corpus.name), milvus.open(corpus.name)
        for qs in corpus.sets:
            queries = load_queries(qs.path)
            n = min(x for x in (qs.first, max_queries, len(queries)) if x) if queries else 0
            asked = queries[:n]
            out.append(_line(qs.label, score_queries(lambda q: _ranked(t, q), asked),
                             score_queries(lambda q: _ranked(m, q), asked),
                             qs.offtopic or qs.path.parent.name == "offtopic"))  # the shared off-topic set
    finally:
        opened = milvus.create_or_open_for_write(corpus.name)
        opened.coll.drop()  # type: ignore[attr-defined]
        tantivy.close()
        milvus.close()
    return out


@contextlib.contextmanager
def _lite(workdir: Path) -> Iterator[str]:
    """A `milvus-lite server` (the dev extra) on a free loopback port over workdir/milvus-data,
    stopped after; yields its URI. Raises RuntimeError when it does not listen within 60 s."""
    exe = shutil.which("milvus-lite") or str(Path(sys.executable).with_name("milvus-lite"))
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir / "milvus-lite.log", "ab") as log:
        proc = subprocess.Popen([exe, "server", "--data-dir", str(workdir / "milvus-data"), "--host", "127.0.0.1",
                                 "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: listening(port), proc, 60, f"milvus-lite server (see {workdir / 'milvus-lite.log'})")
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc, grace=30)


def run_parity(corpora: list[str], max_queries: int, workdir: Path, uri: str) -> int:
    """Print the parity lines of each corpus (module doc); 0, or 2 when a corpus file is missing.
    uri: a Milvus to use, or "lite": a `milvus-lite server` started for the run."""
    if uri == "lite":
        with _lite(workdir / "backends") as started:
            return run_parity(corpora, max_queries, workdir, started)
    chosen = present_corpora(corpora)
    if chosen is None:
        return 2
    workdir = workdir / "backends"
    for c in chosen:
        for line in _one(c, max_queries, workdir / c.name, uri):
            print(line, flush=True)
    return 0
