"""What the load generators send: per-corpus query streams and the request bodies built from them.

Rationale: docs/design-notes.md, "bench/workload.py".
"""

from __future__ import annotations

import bisect
import itertools
import json
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import orjson

from bench.corpus import CORPORA, corpus_documents
from gateway.core.answers import normalize_query

__all__ = ["CORPUS_SOURCES", "MIXES", "Stream", "callback_body", "real_queries", "repeat_share", "unique_queries",
           "write_bodies", "zipf_queries"]

CORPUS_SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    # name: (documents path under CORPORA, question files under CORPORA)
    "cmrc2018": ("cmrc2018/docs.jsonl", ("cmrc2018/queries.jsonl",)),
    "tidb-docs-cn": ("tidb-docs-cn/docs", ("tidb-docs-cn/queries.jsonl", "tidb-docs-cn/queries.colloquial.jsonl")),
}
"""The two real corpora routed end to end, with their question files."""

MIXES = ("unique", "zipf")
ZIPF_S = 1.1
ZIPF_POOL = 1_000
_PASSES = 8
_SENTENCE = re.compile(r"[^。！？!?\n；;]+")


def real_queries(corpus: str, root: Path = CORPORA) -> list[str]:
    """The real non-blank questions of `corpus` (a CORPUS_SOURCES name), in file order.
    Raises KeyError for an unknown corpus, FileNotFoundError when its files are absent."""
    out: list[str] = []
    for rel in CORPUS_SOURCES[corpus][1]:
        with (root / rel).open(encoding="utf-8") as fh:
            out.extend(q.strip() for q in (json.loads(line)["query"] for line in fh if line.strip()) if q.strip())
    return out


def unique_queries(real: Sequence[str], texts: Iterable[str], n: int, seed: int = 13) -> list[str]:
    """`n` queries distinct as the answer cache keys them (`normalize_query`): `real`
    (deduplicated, seeded shuffle) then sentences of `texts`
    cut to lengths drawn from the real questions' lengths (at least 6 characters; up to
    8 passes over the sentences, each cutting them anew).

    texts: the corpus's chunk texts. Returns fewer than `n` only when the text runs out of
    distinct sentences (the caller reports the count it got)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    by_key: dict[str, str] = {}
    for q in real:
        by_key.setdefault(normalize_query(q), q)  # the first of each cache key, in order
    first = list(by_key.values())
    rng.shuffle(first)
    for q in first[:n]:
        seen.add(normalize_query(q))
        out.append(q)
    lengths = sorted(len(q) for q in first) or [20]
    sentences = [s.strip() for t in texts for s in _SENTENCE.findall(t) if len(s.strip()) >= 6]
    for _ in range(_PASSES):  # a small corpus gives each sentence several different cuts
        rng.shuffle(sentences)
        for s in sentences:
            if len(out) >= n:
                return out
            cut = max(6, rng.choice(lengths))
            start = rng.randrange(0, max(1, len(s) - cut + 1))
            q = s[start:start + cut].strip()
            key = normalize_query(q)
            if len(q) >= 6 and key not in seen:  # distinct as the answer cache keys them
                seen.add(key)
                out.append(q)
    return out


def zipf_queries(pool: Sequence[str], n: int, s: float = ZIPF_S, seed: int = 17) -> list[str]:
    """`n` queries drawn from `pool` with P(rank k) ∝ 1/k^s (rank 1 = pool[0] after a
    seeded shuffle, so the most asked question is not always the file's first).
    Raises ValueError when `pool` is empty."""
    if not pool:
        raise ValueError("zipf_queries: empty pool")
    rng = random.Random(seed)
    ranked = list(pool)
    rng.shuffle(ranked)
    cumulative = list(itertools.accumulate(1.0 / (k ** s) for k in range(1, len(ranked) + 1)))
    total = cumulative[-1]
    return [ranked[min(len(ranked) - 1, bisect.bisect_left(cumulative, rng.random() * total))] for _ in range(n)]


def repeat_share(stream: Sequence[str]) -> float:
    """Share (0..1) of `stream` that repeats an earlier entry: what an unbounded answer
    cache could answer without searching."""
    seen: set[str] = set()
    repeats = 0
    for q in stream:
        if q in seen:
            repeats += 1
        else:
            seen.add(q)
    return repeats / len(stream) if stream else 0.0


def callback_body(first: str, second: str, query: str, limit: int = 5) -> bytes:
    """A Volcengine callback body (the 联网问答Agent callback spec field names), compact JSON bytes."""
    return orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": limit})


def write_bodies(path: Path, bodies: Iterator[bytes] | Iterable[bytes]) -> int:
    """Write one body per line to `path`; returns the count. Raises ValueError for a body
    holding a newline (the line format could not carry it)."""
    n = 0
    with path.open("wb") as fh:
        for b in bodies:
            if b"\n" in b:
                raise ValueError("a request body holds a newline")
            fh.write(b + b"\n")
            n += 1
    return n


class Stream:
    """A corpus's unique queries handed out in disjoint slices, so no phase repeats a
    query another phase sent to the same server; `zipf` draws from a reserved tail."""

    def __init__(self, corpus: str, size: int, limit: int | None) -> None:
        from indexes.ingest import chunk

        docs = corpus_documents(CORPUS_SOURCES[corpus][0], limit)
        self.texts = [c.text for d in docs for c in chunk(d)]
        self.real = real_queries(corpus)
        self.queries = unique_queries(self.real, self.texts, size)
        self._pool = self.queries[-1000:]
        self._end = max(0, len(self.queries) - len(self._pool))
        self._next = 0
        self.reused = 0

    def summary(self) -> dict[str, int]:
        """real, unique (generated), used, reused (queries handed out again: the stream ran short)."""
        return {"real": len(self.real), "unique": len(self.queries), "used": self._next, "reused": self.reused}

    def take(self, n: int) -> list[str]:
        """The next `n` unused queries (fewer, wrapping not allowed, when the stream runs
        short: the caller's `wrapped` figure then shows repeats)."""
        n = max(1, n)
        out = self.queries[self._next:min(self._end, self._next + n)]
        self._next += len(out)
        if len(out) < n:  # ran short: hand out earlier queries again, and say so
            again = self.queries[: min(n - len(out), self._end)]
            self.reused += len(again)
            out = out + again
        return out

    def zipf(self, n: int) -> list[str]:
        return zipf_queries(self._pool, n)
