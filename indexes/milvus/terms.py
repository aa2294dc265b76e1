"""Document frequencies kept at ingest, and the index's shape, for the relevance on Milvus.

Rationale: docs/design-notes.md, "indexes/milvus/terms.py".
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping

from ..analysis import CJK_RANGES
from ..profile import _BUCKET, SAMPLE_DOCUMENTS, Profile
from ..schema import doc_key
from ..segmenter import jieba
from .client import Collection, batched

__all__ = ["PART_BYTES", "counts", "held_keys", "profile", "update_terms"]

PART_BYTES = 60_000
BATCH = 1000
_CJK_WORD = re.compile(f"[{CJK_RANGES}]+")
_UNIT = [1.0, 0.0]  # the terms collection's placeholder vector


def counts(c: Collection, keys: Iterable[str]) -> dict[str, int]:
    """key → documents for each of `keys` held (absent keys: not in the result)."""
    out: dict[str, int] = {}
    for part in batched(list(dict.fromkeys(keys)), BATCH):
        for r in c.read("get", c.terms, ids=part, output_fields=["n"]):
            out[str(r["key"])] = int(r["n"])
    return out


def held_keys(c: Collection, doc_ids: Iterable[str]) -> dict[str, set[str]]:
    """doc_id → the keys it added (`update`), for each of `doc_ids` that has a record."""
    ids = list(dict.fromkeys(doc_ids))
    out: dict[str, set[str]] = {}
    firsts = {str(r["key"]): r for part in batched([f"d:{i}#0" for i in ids], BATCH)
              for r in c.read("get", c.terms, ids=part, output_fields=["n", "keys"])}
    more: list[str] = []
    for i in ids:
        r = firsts.get(f"d:{i}#0")
        if r is not None:
            out[i] = set(str(r["keys"]).split())
            more += [f"d:{i}#{k}" for k in range(1, int(r["n"]))]
    for part in batched(more, BATCH):
        for r in c.read("get", c.terms, ids=part, output_fields=["keys"]):
            out[str(r["key"]).rpartition("#")[0][2:]].update(str(r["keys"]).split())
    return out


def _parts(keys: set[str]) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    size = 0
    for k in sorted(keys):
        n = len(k.encode("utf-8")) + 1
        if cur and size + n > PART_BYTES:
            parts.append(" ".join(cur))
            cur, size = [], 0
        cur.append(k)
        size += n
    parts.append(" ".join(cur))
    return parts


def update_terms(c: Collection, new: Mapping[str, set[str] | None], old: Mapping[str, set[str]]) -> None:
    """Record documents written (`new`: doc_id → its keys) and deleted (None), given what each
    held before (`old`, from `held_keys`): counts moved by the difference, the documents' own
    records replaced. Not atomic with the chunk rows (Milvus has no transactions): a writer that
    dies between the two leaves counts off by that document's words until it is written again."""
    delta: Counter[str] = Counter()
    for doc_id, keys in new.items():
        before = old.get(doc_id, set())
        after = keys or set()
        delta.update(after - before)
        delta.subtract(before - after)
    changed = [k for k, d in delta.items() if d]
    now = counts(c, changed)
    after_counts = {k: max(now.get(k, 0) + delta[k], 0) for k in changed}
    rows = [{"key": k, "n": n, "keys": "", "v": _UNIT} for k, n in after_counts.items() if n > 0]
    for part in batched(rows, BATCH):
        c.call("upsert", c.terms, part)
    gone = [k for k, n in after_counts.items() if n <= 0]
    for doc_id, keys in new.items():
        before_parts = len(_parts(old[doc_id])) if doc_id in old else 0
        parts = _parts(keys) if keys else []
        records: list[dict[str, object]] = [
            {"key": f"d:{doc_id}#{k}", "n": len(parts) if k == 0 else k, "keys": p, "v": _UNIT}
            for k, p in enumerate(parts)]
        for part in batched(records, BATCH):
            c.call("upsert", c.terms, part)
        gone += [f"d:{doc_id}#{k}" for k in range(len(parts), before_parts)]
    for keys_part in batched(gone, BATCH):
        c.call("delete", c.terms, ids=keys_part)


def profile(c: Collection) -> Profile:
    """The index's `Profile` from its chunk rows: documents by chunk count (`_buckets`), and L, the
    median CJK words of the middle chunk of up to SAMPLE_DOCUMENTS documents spread over them by `doc_key`."""
    firsts = c.scan(c.chunks, "chunk == 0", ["doc_id", "n_chunks"])
    if not firsts:
        return Profile((), 0.0, 0)
    sizes = Counter(max(int(r["n_chunks"]), 1) for r in firsts)
    # ordered by doc_key, as `indexes.profile` samples them: the same documents on both backends
    ordered = sorted((doc_key(str(r["doc_id"])), str(r["doc_id"]), max(int(r["n_chunks"]), 1)) for r in firsts)
    picked = ordered[::max(len(ordered) // SAMPLE_DOCUMENTS, 1)][:SAMPLE_DOCUMENTS]
    ids = [f"{d}#{n // 2 if n > 2 else 0}" for _, d, n in picked]
    words = sorted(sum(1 for t in jieba().cut(f"{r['heading']}\n{r['text_fold'] or r['text']}")
                       if _CJK_WORD.fullmatch(t))
                   for r in c.read("get", c.chunks, ids=ids, output_fields=["heading", "text", "text_fold"]))
    median = float(words[(len(words) - 1) // 2]) if words else 0.0  # as `indexes.profile` reads it
    return Profile(_buckets(sizes, len(firsts)), median, len(firsts))


def _buckets(sizes: Counter[int], documents: int) -> tuple[tuple[float, int], ...]:
    """Documents by chunk count in `indexes.profile`'s buckets (growing by _BUCKET, each at the
    geometric middle of its range), so the domain weight is the Tantivy index's to the digit."""
    out: list[tuple[float, int]] = []
    low, more = 1, documents
    while more > 0:
        high = max(low + 1, math.ceil(low * _BUCKET))
        beyond = sum(k for n, k in sizes.items() if n >= high)
        if more > beyond:
            out.append((math.sqrt(low * (high - 1)), more - beyond))
        low, more = high, beyond
    return tuple(out)
