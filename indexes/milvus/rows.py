"""A document as Milvus rows, and a Milvus row read back as the stored chunk the shared code reads.

Rationale: docs/design-notes.md, "indexes/milvus/rows.py".
"""

from __future__ import annotations

from typing import Any

from ..analysis import cjk_bigrams
from ..records import chunk_fields
from ..types import Document
from .client import STORED, TEXT_BYTES

__all__ = ["Row", "rows_of"]

_OPTIONAL_INTS = ("cover_height", "cover_width", "publish_time")
_UNSET = -1


def _cut(text: str) -> str:
    """`text` within Milvus's VARCHAR bound in bytes (cut at a character)."""
    raw = text.encode("utf-8")
    return text if len(raw) <= TEXT_BYTES else raw[:TEXT_BYTES].decode("utf-8", "ignore")


def _chars(runs: list[str]) -> str:
    """Every CJK character and bigram of the runs, space-joined (Tantivy's ngram(1, 2) per run)."""
    return " ".join([*(c for r in runs for c in r), *cjk_bigrams(runs)])


def rows_of(doc: Document, revision: str, chunk_chars: int) -> tuple[list[dict[str, Any]], set[str]]:
    """(the rows of `doc`'s chunks, primary key '{doc_id}#{chunk}'; the keys of
    `indexes.milvus.terms` it holds: 'w:' + each word of its bodies and title, what
    `indexes.relevance.question` looks a CJK word up in, and 'l:' + each Latin word of its bodies).
    Raises ValueError for a value Milvus cannot store (a stored field over its byte bound)."""
    out = []
    words: set[str] = set()
    latin: set[str] = set()
    for f in chunk_fields(doc, revision, chunk_chars):
        row: dict[str, Any] = {"id": f["chunk_id"]}
        for name in STORED:
            v = f.get(name)
            if name == "qa_visible":
                row[name] = bool(v)
            elif name in _OPTIONAL_INTS:
                row[name] = _UNSET if v is None else int(v)
            elif name in ("chunk", "n_chunks", "section", "overlap"):
                row[name] = int(v or 0)
            else:
                row[name] = "" if v is None else str(v)
        title_runs = f["title_chars"]
        row["words"] = _cut(f["body_words"])
        row["latin"] = _cut(f["body_latin"])
        row["chars"] = _cut(_chars(f["body_chars"]))
        row["titles"] = _cut(" ".join(p for p in (f["title_words"], _chars(title_runs)) if p))
        if len(row["text"].encode("utf-8")) > TEXT_BYTES or len(row["metadata"].encode("utf-8")) > TEXT_BYTES:
            raise ValueError(f"document {doc.id!r}: a chunk or its metadata is over {TEXT_BYTES} bytes")
        out.append(row)
        words.update(f["body_words"].split())
        words.update(f["title_words"].split())
        latin.update(f["body_latin"].split())
    return out, {f"w:{w}" for w in words} | {f"l:{w}" for w in latin}


class Row:
    """A row read from Milvus, read as a Tantivy document is (`get_first`)."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def get_first(self, name: str) -> Any:
        v = self.data.get(name)
        if name == "qa_visible":
            return 1 if v else 0
        if v == "" or (name in _OPTIONAL_INTS and v == _UNSET):
            return None
        return v
