"""The Tantivy schema of a kbgate index, its analyzer registration and version sidecar.

One Tantivy document per chunk. Stored fields carry what a `Hit` needs; the
four analysis fields hold pre-analysed tokens (see `indexes.analysis`) joined
by spaces and are tokenized by `TOKENIZER`, a whitespace tokenizer with a
length guard. Tantivy does not persist tokenizer registrations, so
`register_analyzers` must run after every `Index(...)`/`Index.open(...)`
(/work/shared/notes/tantivy-py-0.27.md).

`SCHEMA_VERSION` is written to `SIDECAR` (JSON) in the index folder; opening an
index of another version raises `SchemaVersionError`. Bump it whenever fields
or the analysis change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import tantivy

from .errors import SchemaVersionError

__all__ = [
    "ANALYSIS_FIELDS",
    "SCHEMA_VERSION",
    "SIDECAR",
    "TOKENIZER",
    "build_schema",
    "check_sidecar",
    "register_analyzers",
    "write_sidecar",
]

SCHEMA_VERSION = 2  # 2: text_fold (excerpt positions folded at index time)
SIDECAR = "kbgate-index.json"
TOKENIZER = "kbgate_tokens"
ANALYSIS_FIELDS = ("body_words", "body_bigrams", "title_words", "title_bigrams")

_RAW_STORED = ("doc_id", "chunk_id", "title", "heading", "url", "cover_url", "path", "dataset",
               "revision")
_INT_STORED = ("chunk", "n_chunks", "overlap", "section", "publish_time", "cover_height",
               "cover_width", "qa_visible")
# Long free text is stored as UTF-8 bytes: a text field is always indexed, and a
# `raw`-indexed chunk body would fill the term dictionary with one term per chunk.
# text_fold: `analysis.normalize_positions(text)` when it differs from text and has its
# length, so excerpts locate query terms without folding at query time.
_BYTES_STORED = ("text", "summary", "text_fold")


def build_schema() -> tantivy.Schema:
    """The schema of SCHEMA_VERSION. Indexed: doc_id, path, dataset (raw terms), chunk,
    qa_visible (integers) and the analysis fields (term frequencies, no positions)."""
    sb = tantivy.SchemaBuilder()
    for name in _RAW_STORED:
        sb.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in _INT_STORED:
        sb.add_integer_field(name, stored=True, indexed=name in ("chunk", "qa_visible"),
                             fast=name in ("chunk", "qa_visible"))
    for name in _BYTES_STORED:
        sb.add_bytes_field(name, stored=True)
    for name in ANALYSIS_FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    return sb.build()


def register_analyzers(index: tantivy.Index) -> None:
    """Register TOKENIZER on `index`; call after every open (not persisted by Tantivy)."""
    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.remove_long(256))
        .build()
    )
    index.register_tokenizer(TOKENIZER, analyzer)


def write_sidecar(folder: Path, extra: dict[str, Any] | None = None) -> None:
    """Write {"schema_version": SCHEMA_VERSION, ...extra} to folder/SIDECAR atomically."""
    payload = {"schema_version": SCHEMA_VERSION, **(extra or {})}
    tmp = folder / (SIDECAR + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    tmp.replace(folder / SIDECAR)


def check_sidecar(folder: Path, name: str) -> dict[str, Any]:
    """The sidecar of an existing index. Raises SchemaVersionError when missing or different."""
    try:
        payload = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
        found = payload.get("schema_version") if isinstance(payload, dict) else None
    except (OSError, ValueError):
        payload, found = {}, None
    if found != SCHEMA_VERSION:
        raise SchemaVersionError(name, str(folder), found, SCHEMA_VERSION)
    return dict(payload)
