"""The benchmark corpus: the real shared passages plus a deterministic scale-up.

Rationale: docs/design-notes.md, "bench/corpus.py".
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from indexes.ingest import chunk, read_paths
from indexes.ingest.chunking import DEFAULT_MAX_CHARS
from indexes.types import Document, Section

__all__ = ["CORPORA", "Pool", "corpus_documents", "documents", "huge_document", "load_pool", "parse_scale", "queries"]

CORPORA = Path(__file__).resolve().parents[2] / "shared" / "corpora"
_SENTENCE = re.compile(r"[^。！？!?\n]+[。！？!?]*")


def parse_scale(text: str) -> int:
    """'10k' → 10_000, '1m' → 1_000_000, '2000' → 2000. Raises ValueError otherwise."""
    t = text.strip().lower()
    mult = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    digits = t[:-1] if mult != 1 else t
    if not digits.isdigit() or int(digits) <= 0:
        raise ValueError(f"scale {text!r}: expected a positive count like 2000, 10k, 1m")
    return int(digits) * mult


def scale_label(n: int) -> str:
    """10_000 → '10k', 1_000_000 → '1m', 2500 → '2500'."""
    if n % 1_000_000 == 0:
        return f"{n // 1_000_000}m"
    if n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


@dataclass(frozen=True, slots=True)
class Pool:
    """What the scale-up draws from: real documents with their chunk counts, the
    sentences and titles of the real chunks, and the real chunk lengths (characters)."""

    real: tuple[tuple[Document, int], ...]
    sentences: tuple[str, ...]
    titles: tuple[str, ...]
    lengths: tuple[int, ...]


def load_pool(root: Path = CORPORA) -> Pool:
    """Read both shared corpora. Raises FileNotFoundError when they are absent."""
    sources = [root / "cmrc2018" / "docs.jsonl", root / "tidb-docs-cn" / "docs"]
    for s in sources:
        if not s.exists():
            raise FileNotFoundError(f"shared corpus not found: {s}")
    real: list[tuple[Document, int]] = []
    sentences: list[str] = []
    lengths: list[int] = []
    for doc in read_paths(sources):
        if not isinstance(doc, Document):
            continue
        chunks = chunk(doc)
        real.append((doc, len(chunks)))
        for c in chunks:
            lengths.append(len(c.text))
            sentences.extend(s.strip() for s in _SENTENCE.findall(c.text) if len(s.strip()) >= 4)
    titles = tuple(d.title for d, _ in real if d.title)
    return Pool(tuple(real), tuple(sentences), titles, tuple(lengths))


def documents(n_chunks: int, pool: Pool, seed: int = 20261130) -> Iterator[Document]:
    """Documents totalling exactly `n_chunks` chunks (see module docstring). Deterministic
    for a given (n_chunks, pool, seed)."""
    rng = random.Random(seed)
    order = list(range(len(pool.real)))
    rng.shuffle(order)
    left = n_chunks
    for i in order:
        doc, k = pool.real[i]
        if k <= left:
            left -= k
            yield doc
        if left == 0:
            return
    sentences, lengths, titles = pool.sentences, pool.lengths, pool.titles
    cap = DEFAULT_MAX_CHARS - 20
    serial = 0
    while left > 0:
        serial += 1
        n_sections = min(left, rng.randint(1, 4))
        sections = []
        for s in range(n_sections):
            target = min(cap, rng.choice(lengths))
            parts: list[str] = []
            size = 0
            while size < target:
                sent = rng.choice(sentences)[:cap]
                if size + len(sent) > cap:
                    break
                parts.append(sent)
                size += len(sent)
            sections.append(Section(f"第{s + 1}节" if n_sections > 1 else "", "".join(parts) or sent))
        left -= n_sections
        yield Document(
            id=f"syn-{serial:07d}",
            title=f"{rng.choice(titles)}（{serial}）",
            sections=tuple(sections),
            path=f"syn/{serial % 64:02d}/{serial}.md",
            dataset="synthetic",
        )


def queries(root: Path = CORPORA) -> list[str]:
    """The real non-blank questions of both corpora (cmrc2018 first), in file order."""
    out: list[str] = []
    for f in (root / "cmrc2018" / "queries.jsonl", root / "tidb-docs-cn" / "queries.jsonl"):
        with f.open(encoding="utf-8") as fh:
            out.extend(q for q in (json.loads(line)["query"] for line in fh if line.strip()) if q.strip())
    return out


def corpus_documents(relative: str, limit: int | None = None, root: Path = CORPORA) -> list[Document]:
    """The documents of one shared corpus (`relative` to `root`, e.g. "tidb-docs-cn/docs"),
    read with the indexer's own reader; the first `limit` only when given (smoke runs).
    Raises FileNotFoundError when the corpus is absent."""
    source = root / relative
    if not source.exists():
        raise FileNotFoundError(f"shared corpus not found: {source}")
    out: list[Document] = []
    for doc in read_paths([source]):
        if isinstance(doc, Document):
            out.append(doc)
            if limit is not None and len(out) >= limit:
                break
    return out


def huge_document(n_chunks: int, texts: list[str], seed: int = 35_000, doc_id: str = "huge/manual.md") -> Document:
    """One document of about `n_chunks` chunks built from sentences of `texts` (real chunk
    texts): sections of 330-580 characters, so no two sections merge into one chunk and
    none is split ("one oversized document", made at run time). Its title and
    headings hold the word 合订本, which no shared corpus text has. The exact
    count is `len(chunk(doc))`; callers report that. Raises ValueError when `texts` has
    no sentence."""
    sentences = [s.strip() for t in texts for s in _SENTENCE.findall(t) if 4 <= len(s.strip()) <= 200]
    if not sentences:
        raise ValueError("huge_document: no sentences in the given texts")
    rng = random.Random(seed)
    sections = []
    for i in range(n_chunks):
        target = rng.randint(330, DEFAULT_MAX_CHARS - 20)
        parts: list[str] = []
        size = 0
        while size < target:
            sent = rng.choice(sentences)
            if size + len(sent) > DEFAULT_MAX_CHARS - 20:
                break
            parts.append(sent)
            size += len(sent)
        sections.append(Section(f"合订本第{i + 1}节", "".join(parts)))
    return Document(id=doc_id, title="运维总手册（合订本）", sections=tuple(sections), path=doc_id, dataset="huge")
