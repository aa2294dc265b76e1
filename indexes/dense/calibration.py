"""The cosine line of one index's vectors: where its model's cosines lie for this corpus.

Rationale: docs/design-notes.md, "indexes/dense/calibration.py".
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import orjson

from .config import COSINE_LINES, DenseConfig

__all__ = ["LINE_FILE", "CosineLine", "effective", "line_for", "measure", "read_line", "stored_texts", "still_fits",
           "write_line"]

log = logging.getLogger("kbgate.dense")

LINE_FILE = "cosine_line.json"
PROBE_CHUNKS = 48
COMPARED = 2000
ZERO_QUANTILE = 0.90
ONE_QUANTILE = 0.90
MIN_DOCUMENTS = 8
MIN_WIDTH = 0.02
REMEASURE_GROWTH = 2.0
PROBE_CHARS = 40
_SENTENCE = re.compile(r"[。！？!?；;\n]")
SOURCES = ("measured", "config", "model")

Texts = Callable[[Sequence[str]], Sequence[tuple[str, str, str] | None]]
"""texts(chunk ids) → (page title, section heading, chunk text) of each, None where not found."""


@dataclass(frozen=True, slots=True)
class CosineLine:
    """zero / one: the cosines mapped to relevance 0 and 1; source: one of SOURCES. For a
    measured line: chunks (the vector set's size when measured), probes (pseudo-questions),
    pairs (unrelated cosines read)."""

    zero: float
    one: float
    source: str
    chunks: int = 0
    probes: int = 0
    pairs: int = 0

    @property
    def pair(self) -> tuple[float, float]:
        return (self.zero, self.one)

    def view(self) -> dict[str, object]:
        """The try's `SearchTrace.cosine_line`: {"zero", "one", "source"}."""
        return {"zero": self.zero, "one": self.one, "source": self.source}


class _Previous(Protocol):
    """What `line_for` reads of the previous `VectorSet` (vectors stores the line: no import)."""

    chunk_of: dict[int, tuple[str, str]]
    dim: int
    line: CosineLine | None

    def vectors(self, keys: Sequence[int]) -> npt.NDArray[np.float32]: ...


class _Entry(Protocol):
    """What `line_for` reads of a new `vectors.Entry` (a frozen dataclass: read-only)."""

    @property
    def chunk_id(self) -> str: ...

    @property
    def doc_id(self) -> str: ...

    @property
    def vector(self) -> npt.NDArray[np.float32]: ...


def effective(config: DenseConfig, measured: CosineLine | None) -> CosineLine:
    """The line a search judges on: the config's cosine_zero / cosine_one where set (each
    overrides its end), else the measured line, else the model's (`COSINE_LINES`)."""
    base = measured if measured is not None else CosineLine(*config.cosine_line, source="model")
    if config.cosine_zero is None and config.cosine_one is None:
        return base
    zero = config.cosine_zero if config.cosine_zero is not None else base.zero
    one = config.cosine_one if config.cosine_one is not None else base.one
    if one <= zero:  # one end set by hand, the other measured past it: keep the model's width
        model = COSINE_LINES.get(config.model, COSINE_LINES["use-multilingual-v3"])
        width = model[1] - model[0]
        zero, one = (zero, zero + width) if config.cosine_zero is not None else (one - width, one)
    return CosineLine(zero, one, "config")


def still_fits(line: CosineLine | None, chunks: int) -> bool:
    """True when `line` was measured on a set within REMEASURE_GROWTH times `chunks` either way
    (a publish then carries it over instead of measuring again)."""
    if line is None or line.source != "measured" or line.chunks <= 0:
        return False
    return line.chunks / REMEASURE_GROWTH <= chunks <= line.chunks * REMEASURE_GROWTH


def _rank(chunk_id: str) -> bytes:
    return hashlib.blake2b(chunk_id.encode("utf-8"), digest_size=8).digest()


def probe_texts(title: str, heading: str, text: str) -> list[str]:
    """The pseudo-questions of one chunk: its title and heading, its first sentence of at least
    8 characters (each cut to PROBE_CHARS); [] when it has neither."""
    out = []
    head = " ".join(p for p in dict.fromkeys((title.strip(), heading.strip())) if p)
    if len(head) >= 2:
        out.append(head[:PROBE_CHARS])
    sentence = next((s.strip() for s in _SENTENCE.split(text) if len(s.strip()) >= 8), "")
    if sentence:
        out.append(sentence[:PROBE_CHARS])
    return out


def measure(chunks: Sequence[tuple[str, str]], vectors: Callable[[Sequence[int]], npt.NDArray[np.float32]],
            texts: Texts, embed_query: Callable[[str], npt.NDArray[np.float32]]) -> CosineLine | None:
    """The measured line of a vector set (module doc), or None when it holds fewer than
    MIN_DOCUMENTS documents with a probe. chunks: (chunk_id, doc_id) of each position;
    vectors(positions): their unit vectors (len, dim); embed_query(text): a unit query vector.
    Raises what embed_query raises (the provider's EmbeddingError)."""
    order = sorted(range(len(chunks)), key=lambda i: _rank(chunks[i][0]))
    firsts: list[int] = []
    docs: set[str] = set()
    for i in order:
        if chunks[i][1] not in docs:
            docs.add(chunks[i][1])
            firsts.append(i)
    if len(firsts) < MIN_DOCUMENTS:
        return None
    probes: list[tuple[int, str]] = []  # (position of its chunk, text)
    taken = 0
    for start in range(0, len(firsts), PROBE_CHUNKS):
        part = firsts[start:start + PROBE_CHUNKS]
        for i, found in zip(part, texts([chunks[i][0] for i in part]), strict=True):
            got = probe_texts(*found) if found is not None and taken < PROBE_CHUNKS else []
            probes += [(i, t) for t in got]
            taken += 1 if got else 0
        if taken >= PROBE_CHUNKS:
            break
    if taken < MIN_DOCUMENTS:
        return None
    compared = order[:COMPARED]
    queries = np.vstack([embed_query(t) for _, t in probes]).astype(np.float32)
    own = vectors([i for i, _ in probes])
    related = np.einsum("ij,ij->i", queries, own)
    sims = queries @ vectors(compared).T
    doc_of = np.array([chunks[i][1] for i in compared])
    probe_doc = np.array([chunks[i][1] for i, _ in probes])
    unrelated = sims[doc_of[None, :] != probe_doc[:, None]]
    if unrelated.size == 0:
        return None
    zero = float(np.quantile(unrelated, ZERO_QUANTILE))
    one = max(float(np.quantile(related, ONE_QUANTILE)), zero + MIN_WIDTH)
    return CosineLine(round(zero, 4), round(one, 4), "measured", chunks=len(chunks), probes=len(probes),
                      pairs=int(unrelated.size))


def read_line(folder: Path) -> CosineLine | None:
    """The measured line stored in a generation folder, or None (absent or unreadable)."""
    try:
        raw = orjson.loads((Path(folder) / LINE_FILE).read_bytes())
        line = CosineLine(float(raw["zero"]), float(raw["one"]), "measured", int(raw.get("chunks", 0)),
                          int(raw.get("probes", 0)), int(raw.get("pairs", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return line if line.one > line.zero else None


def write_line(folder: Path, line: CosineLine) -> None:
    """Store `line` in a generation folder (written whole, then renamed into place)."""
    tmp = Path(folder) / f".{LINE_FILE}.tmp"
    tmp.write_bytes(orjson.dumps(asdict(line)))
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    tmp.replace(Path(folder) / LINE_FILE)


def stored_texts(searcher: Any, schema: Any, chunk_ids: Sequence[str]) -> list[tuple[str, str, str] | None]:
    """(title, heading, text) of each chunk id in a Tantivy searcher's commit (`Texts`)."""
    from tantivy import Query

    from ..documents import stored_str

    out: list[tuple[str, str, str] | None] = []
    for cid in chunk_ids:
        hits = searcher.search(Query.term_query(schema, "chunk_id", cid), 1, count=False).hits
        if not hits:
            out.append(None)
            continue
        doc = searcher.doc(hits[0][1])
        out.append((stored_str(doc, "title") or "", stored_str(doc, "heading") or "", stored_str(doc, "text") or ""))
    return out


def line_for(previous: _Previous | None, keep: Sequence[int], added: Sequence[_Entry], texts: Texts,
             embed_query: Callable[[str], npt.NDArray[np.float32]]) -> CosineLine | None:
    """The line to store with a vector set about to be published: `previous`'s (of the same
    model) while the set stays within REMEASURE_GROWTH of the size it was measured on, else
    measured anew on its chunks (`keep`: keys of `previous` kept; `added`: new entries).
    None when the set is too small to measure. Raises what embed_query raises."""
    total = len(keep) + len(added)
    if previous is not None and still_fits(previous.line, total):
        return previous.line
    kept = list(keep)
    chunks = [previous.chunk_of[k] for k in kept] if previous is not None else []
    chunks += [(e.chunk_id, e.doc_id) for e in added]

    def vectors(positions: Sequence[int]) -> npt.NDArray[np.float32]:
        old = [p for p in positions if p < len(kept)]
        rows = dict(zip(old, previous.vectors([kept[p] for p in old]) if previous is not None and old else [],
                        strict=True))
        dim = added[0].vector.shape[0] if added else (previous.dim if previous is not None else 0)
        out = np.zeros((len(positions), dim), dtype=np.float32)
        for n, p in enumerate(positions):
            out[n] = rows[p] if p < len(kept) else added[p - len(kept)].vector
        return out

    line = measure(chunks, vectors, texts, embed_query)
    if line is not None:
        log.info("cosine line measured", extra={"zero": line.zero, "one": line.one, "probes": line.probes})
    return line
