"""The Tantivy schema of a kbgate index, its analyzer registration and version sidecar.

One Tantivy document per chunk. Stored fields carry what a `Hit` needs; the
four word/bigram analysis fields hold pre-analysed tokens (see `indexes.analysis`)
joined by spaces and are tokenized by `TOKENIZER`, a whitespace tokenizer with a
length guard; the two unigram fields hold the normalized text and are tokenized in
Rust by `UNIGRAM_TOKENIZER` (one token per CJK character), so a one-character query
finds every chunk with that character (issue 9). `doc_key` (a 64-bit hash of doc_id,
indexed and a fast field) lets a search collapse hits per document and exclude
documents without loading stored documents. Tantivy does not persist tokenizer
registrations, so `register_analyzers` must run after every `Index(...)`/`Index.open(...)`
(/work/shared/notes/tantivy-py-0.27.md).

`SCHEMA_VERSION` is written to `SIDECAR` (JSON) in the index folder; opening an
index of another version raises `SchemaVersionError`. Bump it whenever fields
or the analysis change.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import tantivy

from .errors import SchemaVersionError

__all__ = [
    "ANALYSIS_FIELDS",
    "DOC_TITLE_FIELDS",
    "SCHEMA_VERSION",
    "SIDECAR",
    "TOKENIZER",
    "UNIGRAM_FIELDS",
    "UNIGRAM_TOKENIZER",
    "build_schema",
    "doc_key",
    "check_sidecar",
    "register_analyzers",
    "write_sidecar",
]

SCHEMA_VERSION = 6
# 2: text_fold (excerpt positions folded at index time)
# 3: doc_key (collapse per document on a fast field), body_unigrams / title_unigrams
# 4: doc_title_words / doc_title_bigrams (document frequencies of title terms); title_words
#    and title_bigrams without frequencies
# 5: body analysis of a chunk includes its section's heading trail (Section.trail)
# 6: document metadata: meta_keys / meta_text / meta_num terms (indexes.metadata) and the
#    kept fields stored as `metadata`
SIDECAR = "kbgate-index.json"
TOKENIZER = "kbgate_tokens"
UNIGRAM_TOKENIZER = "kbgate_cjk_chars"
ANALYSIS_FIELDS = ("body_words", "body_bigrams", "title_words", "title_bigrams")
UNIGRAM_FIELDS = ("body_unigrams", "title_unigrams")
# The title's words and bigrams again, on chunk 0 only: their document frequencies count
# documents, for the title clauses of indexes.search.terms_query. Not scored themselves.
DOC_TITLE_FIELDS = ("doc_title_words", "doc_title_bigrams")
# The CJK ranges of indexes.analysis._CJK, in Rust regex syntax.
_CJK_CHAR = r"[\x{3400}-\x{4DBF}\x{4E00}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2FA1F}]"

_RAW_STORED = ("doc_id", "chunk_id", "title", "heading", "url", "cover_url", "path", "dataset",
               "revision")
_INT_STORED = ("chunk", "n_chunks", "overlap", "section", "publish_time", "cover_height",
               "cover_width", "qa_visible")
# Long free text is stored as UTF-8 bytes: a text field is always indexed, and a
# `raw`-indexed chunk body would fill the term dictionary with one term per chunk.
# text_fold: `analysis.normalize_positions(text)` when it differs from text and has its
# length, so excerpts locate query terms without folding at query time.
_BYTES_STORED = ("text", "summary", "text_fold", "metadata")
# Metadata terms for filters (indexes.metadata.FIELDS): untokenized, indexed only.
_META_INDEXED = ("meta_keys", "meta_text", "meta_num")


def build_schema() -> tantivy.Schema:
    """The schema of SCHEMA_VERSION. Indexed: doc_id, path, dataset (raw terms), chunk,
    qa_visible (integers), the analysis fields (term frequencies, no positions) and the
    metadata terms (raw, indexes.metadata)."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("doc_key", stored=False, indexed=True, fast=True)
    for name in _RAW_STORED:
        sb.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in _INT_STORED:
        sb.add_integer_field(name, stored=True, indexed=name in ("chunk", "qa_visible"),
                             fast=name in ("chunk", "qa_visible"))
    for name in _BYTES_STORED:
        sb.add_bytes_field(name, stored=True)
    for name in ANALYSIS_FIELDS:
        # Title terms are matched, not BM25-scored (indexes.search.terms_query): no frequencies.
        sb.add_text_field(name, stored=False, tokenizer_name=TOKENIZER,
                          index_option="basic" if name.startswith("title_") else "freq")
    for name in UNIGRAM_FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name=UNIGRAM_TOKENIZER, index_option="freq")
    for name in DOC_TITLE_FIELDS:
        sb.add_text_field(name, stored=False, tokenizer_name=TOKENIZER, index_option="basic")
    for name in _META_INDEXED:
        sb.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    return sb.build()


def doc_key(doc_id: str) -> int:
    """The `doc_key` of `doc_id`: its BLAKE2b-64 digest as a signed 64-bit integer.

    Two ids share a key with probability about n²/2⁶⁵ for n documents (1e-8 at 1M): such
    documents would be collapsed into one result.
    """
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def register_analyzers(index: tantivy.Index) -> None:
    """Register TOKENIZER and UNIGRAM_TOKENIZER on `index`; call after every open (not
    persisted by Tantivy)."""
    analyzer = (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
        .filter(tantivy.Filter.remove_long(256))
        .build()
    )
    index.register_tokenizer(TOKENIZER, analyzer)
    index.register_tokenizer(UNIGRAM_TOKENIZER,
                             tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(_CJK_CHAR)).build())


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
