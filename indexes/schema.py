"""The Tantivy schema of a kbgate index, its analyzer registration and version sidecar, and
opening or creating an index folder with them (`open_index`, `open_or_create`).

Rationale: docs/design-notes.md, "indexes/schema.py".
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tantivy

from .errors import (
    DiskFullError,
    IndexCorruptError,
    IndexNotFoundError,
    IndexReadOnlyError,
    IndexStoreError,
    SchemaVersionError,
    is_disk_full,
)
from .readonly import Shadow, read_only

__all__ = [
    "ANALYSIS_FIELDS",
    "CLEAN_AT_INGEST",
    "CLEAN_RULES",
    "CHARS_TOKENIZER",
    "DOC_TITLE_FIELDS",
    "SCHEMA_VERSION",
    "SIDECAR",
    "STORED_TOKENIZER",
    "TOKENIZER",
    "build_schema",
    "check_index",
    "check_sidecar",
    "creating",
    "doc_key",
    "open_index",
    "open_or_create",
    "open_reader",
    "open_tantivy",
    "refuse_read_only",
    "register_analyzers",
    "write_sidecar",
]

SCHEMA_VERSION = 9
# 2: text_fold (excerpt positions folded at index time)
# 3: doc_key (collapse per document on a fast field), body_unigrams / title_unigrams
# 4: doc_title_words / doc_title_bigrams (document frequencies of title terms); title_words
#    and title_bigrams without frequencies
# 5: body analysis of a chunk includes its section's heading trail (Section.trail)
# 6: characters and bigrams analysed in Rust (body_chars / title_chars replace the
#    *_bigrams and *_unigrams fields), Latin words in body_latin, jieba over CJK runs only;
#    stored text in unindexed text fields; text_fold only where it differs from the
#    lower-cased text; the summary on chunk 0 only
# 7: document metadata: meta_keys / meta_text / meta_num terms (indexes.metadata) and the
#    kept fields stored as `metadata`
# 8: zero-width characters folded out of the analysis (indexes.analysis.ZERO_WIDTH); tree
#    documents' ids carry their dataset ('ds1:same.md') and paths are relative to the run's
#    root (indexes.ingest, document identity); the sidecar may record those roots ("roots")
# 9: every format character (Cf: soft hyphen, bidi controls, tag characters...) and the Hangul
#    fillers folded out of the analysis too (indexes.invisible.FOLDED_OUT); `source` (the real
#    path of the file a document was read from) on chunk 0, so a run never replaces a document
#    from another file unasked (indexes.writer.ingest)
SIDECAR = "kbgate-index.json"
CREATE_LOCK = ".kbgate-create.lock"  # held while an index is created (`creating`)
CLEAN_AT_INGEST = "clean_at_ingest"
"""Sidecar key, CLEAN_RULES when the folder was created by a writer that cleans every document it
indexes by today's rules (`indexes.writer.ingest`, `indexes.ingest.clean.clean_document`), so
everything it holds may be served as stored. An index marked by older rules (`true`: before page
URLs were held to a strict parser), or without the mark, is cleaned when served (rebuild it:
`kbgate index add` into a new index name, or after deleting the folder, to drop that pass)."""
CLEAN_RULES = 2
"""The version of the clean-at-ingest rules (`indexes.safe_text`) a new index is marked with:
1 (written `true`) control characters, titles, http(s) URLs; 2 page URLs by a strict parser
(no userinfo, valid host and port, no `"<>`)."""
TOKENIZER = "kbgate_tokens"
CHARS_TOKENIZER = "kbgate_cjk_1_2"
STORED_TOKENIZER = "kbgate_stored_only"
ANALYSIS_FIELDS = ("body_words", "body_latin", "body_chars", "title_words", "title_chars")
# The title's words and characters again, on chunk 0 only: their document frequencies count
# documents, for the title clauses of indexes.search.terms_query. Not scored themselves.
DOC_TITLE_FIELDS = ("doc_title_words", "doc_title_chars")

# Indexed as one raw term: the fields queries and deletes look up.
_RAW_STORED = ("doc_id", "chunk_id", "path", "dataset")
# Stored only (STORED_TOKENIZER). text_fold: `analysis.fold_positions(text)` when it differs
# from text.lower() and has text's length, so excerpts locate query terms without folding at
# query time. summary: the document's front-matter summary, on chunk 0 only. source: the file
# it was read from, on chunk 0 only. metadata: the
# document's kept metadata fields (indexes.metadata.encode), on every chunk.
_TEXT_STORED = ("title", "heading", "url", "cover_url", "revision", "text", "summary", "text_fold", "metadata",
                "source")
# Metadata terms for filters (indexes.metadata.FIELDS): untokenized, indexed only.
_META_INDEXED = ("meta_keys", "meta_text", "meta_num")
_INT_STORED = ("chunk", "n_chunks", "overlap", "section", "publish_time", "cover_height",
               "cover_width", "qa_visible")


def build_schema() -> tantivy.Schema:
    """The schema of SCHEMA_VERSION. Indexed: doc_id, chunk_id, path, dataset (raw terms),
    doc_key, chunk, qa_visible (integers), the analysis fields (term frequencies, no
    positions; title_words and the doc_title fields without frequencies) and the metadata
    terms (raw, indexes.metadata)."""
    sb = tantivy.SchemaBuilder()
    sb.add_integer_field("doc_key", stored=False, indexed=True, fast=True)
    for name in _RAW_STORED:
        sb.add_text_field(name, stored=True, tokenizer_name="raw", index_option="basic")
    for name in _TEXT_STORED:
        sb.add_text_field(name, stored=True, tokenizer_name=STORED_TOKENIZER, index_option="basic")
    for name in _INT_STORED:
        sb.add_integer_field(name, stored=True, indexed=name in ("chunk", "qa_visible"),
                             fast=name in ("chunk", "qa_visible"))
    # Title words are matched, not BM25-scored (indexes.search.terms_query): no frequencies.
    # title_chars keeps them: its single characters are BM25-scored.
    sb.add_text_field("body_words", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    sb.add_text_field("body_latin", stored=False, tokenizer_name=TOKENIZER, index_option="freq")
    sb.add_text_field("body_chars", stored=False, tokenizer_name=CHARS_TOKENIZER, index_option="freq")
    sb.add_text_field("title_words", stored=False, tokenizer_name=TOKENIZER, index_option="basic")
    sb.add_text_field("title_chars", stored=False, tokenizer_name=CHARS_TOKENIZER, index_option="freq")
    sb.add_text_field("doc_title_words", stored=False, tokenizer_name=TOKENIZER, index_option="basic")
    sb.add_text_field("doc_title_chars", stored=False, tokenizer_name=CHARS_TOKENIZER, index_option="basic")
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
    """Register TOKENIZER, CHARS_TOKENIZER and STORED_TOKENIZER on `index`; call after every
    open (not persisted by Tantivy)."""
    index.register_tokenizer(TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace())
                             .filter(tantivy.Filter.remove_long(256)).build())
    # Every character and bigram of each value (a CJK run): the n-gram tokenizer works on
    # characters and never crosses two values.
    index.register_tokenizer(CHARS_TOKENIZER,
                             tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.ngram(1, 2, False)).build())
    # The whole value as one token, removed at once: stored, never indexed.
    index.register_tokenizer(STORED_TOKENIZER, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.raw())
                             .filter(tantivy.Filter.remove_long(0)).build())


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


def open_tantivy(folder: Path, name: str, *, at: Path | None = None) -> tantivy.Index:
    """`tantivy.Index.open(at or folder)` with a reader that reloads only when asked
    (`KnowledgeIndex.maybe_reload`, `reload_policy="manual"`): no thread of Tantivy's watches
    the folder or takes its lock behind kbgate's back. at: a read-only folder's shadow
    (`indexes.readonly.Shadow`). Tantivy's ValueError becomes IndexReadOnlyError when it could
    not take its lock file (the folder cannot be written), else IndexCorruptError (meta.json
    unreadable, a segment file missing or truncated: 'Data corrupted', 'Failed to open file
    for read'), naming the index."""
    try:
        index = tantivy.Index.open(str(at or folder))
    except ValueError as exc:
        detail = str(exc)
        if "Failed to acquire Lockfile" in detail:
            raise IndexReadOnlyError(name, str(folder), "Tantivy cannot take its lock file there ("
                                     + " ".join(detail.split())[:300] + ")") from None
        raise IndexCorruptError(name, str(folder), detail) from None
    index.config_reader(reload_policy="manual")
    return index


def open_reader(folder: Path, name: str, *, shadow: Shadow | None = None) -> tuple[tantivy.Index, Shadow | None]:
    """The index at `folder` opened to read (`open_tantivy`), through a shadow when this
    process cannot write the folder (`indexes.readonly`): `shadow` when given (refreshed
    first: it then links exactly what a new one would), else a new one; the shadow, or None. Raises
    IndexCorruptError, IndexReadOnlyError (the temporary folder cannot be written either),
    IndexStoreError (reason 'unreadable': the folder's files cannot be read by this user)."""
    if not read_only(folder):
        return open_tantivy(folder, name), None
    try:
        shadow = shadow or Shadow(folder, name)
    except OSError as exc:
        raise IndexReadOnlyError(name, str(folder), "its shadow folder could not be made in the temporary folder "
                                 f"{tempfile.gettempdir()} ({exc.strerror or exc}): give the server a writable "
                                 "TMPDIR (a tmpfs or emptyDir at /tmp)") from None
    try:
        shadow.refresh()
        return open_tantivy(folder, name, at=shadow.path), shadow
    except OSError as exc:
        shadow.close()
        raise IndexStoreError(name, f"Index {name!r} at {folder} cannot be read by this process ({exc.strerror or exc}"
                              f"{': ' + str(exc.filename) if exc.filename else ''}): give its user read access "
                              "to the folder and its files.") from None
    except BaseException:
        shadow.close()
        raise


def check_index(folder: Path, name: str, shadows: dict[Path, Shadow] | None = None) -> None:
    """Open the index at `folder` afresh, as a new worker would (`IndexStore.check`). Raises
    IndexNotFoundError, SchemaVersionError, IndexCorruptError, IndexReadOnlyError. A commit
    landing between reading meta.json and opening its segments can fail one attempt, so a
    damaged result is confirmed by a second one. shadows: folder → the shadow its last check
    made (a read-only folder's; kept for the next check, which refreshes it: making one costs a
    file system operation per file), or None (made and removed each time)."""
    for attempt in (1, 2):
        if not (folder / "meta.json").is_file():
            raise IndexNotFoundError(name, str(folder))
        check_sidecar(folder, name)
        try:
            index, shadow = open_reader(folder, name, shadow=None if shadows is None else shadows.pop(folder, None))
            del index
            if shadow is not None and shadows is not None:
                shadows[folder] = shadow
            elif shadow is not None:
                shadow.close()
            return
        except IndexCorruptError:
            if attempt == 2:
                raise


def refuse_read_only(folder: Path, name: str) -> None:
    """Raise IndexReadOnlyError when a writer could not write the index folder `folder`: it
    exists and cannot be written (`indexes.readonly.read_only`), or it does not and the nearest
    existing folder above it cannot be written (the index could not be created)."""
    folder = Path(folder)
    if folder.is_dir():
        if read_only(folder):
            raise IndexReadOnlyError(name, str(folder))
        return
    above = folder.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.is_dir() and not os.access(above, os.W_OK):
        raise IndexReadOnlyError(name, str(folder), f"the index cannot be created: {above} cannot be written "
                                 "by this process (mounted read-only?)")


@contextlib.contextmanager
def creating(folder: Path) -> Iterator[None]:
    """Hold `folder`/CREATE_LOCK (flock, blocking) while an index is created there: two writers
    creating the same new index at once (two server workers, a worker and `kbgate index add`)
    would each write an empty meta.json, the later one over the other's first commit."""
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / CREATE_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def open_index(folder: Path, name: str,
               default_chunk_chars: int) -> tuple[tantivy.Index, int, dict[str, Any], Shadow | None]:
    """The index at `folder` opened to read (`open_reader`), its analyzers registered, its chunk
    size (its sidecar's, else `default_chunk_chars`), its sidecar and its shadow (None unless
    the folder is read-only). Raises IndexNotFoundError, SchemaVersionError, IndexCorruptError,
    IndexReadOnlyError."""
    if not (folder / "meta.json").is_file():
        raise IndexNotFoundError(name, str(folder))
    meta = check_sidecar(folder, name)
    index, shadow = open_reader(folder, name)
    register_analyzers(index)
    return index, int(meta.get("chunk_chars", default_chunk_chars)), meta, shadow


def open_or_create(folder: Path, name: str, chunk_chars: int) -> tuple[tantivy.Index, int]:
    """The index at `folder`, created first (folder, schema, a sidecar with `chunk_chars`) when
    absent, under the create lock (`creating`); its analyzers registered; and its chunk size (an
    existing index keeps its own). Raises SchemaVersionError, IndexCorruptError, DiskFullError,
    and IndexReadOnlyError when this process cannot write the folder (or create it)."""
    refuse_read_only(folder, name)
    with creating(folder):
        if (folder / "meta.json").is_file():
            meta = check_sidecar(folder, name)
            index = open_tantivy(folder, name)
            chunk_chars = int(meta.get("chunk_chars", chunk_chars))
        else:
            try:
                index = tantivy.Index(build_schema(), path=str(folder))
                index.config_reader(reload_policy="manual")
                write_sidecar(folder, {"chunk_chars": chunk_chars, CLEAN_AT_INGEST: CLEAN_RULES})
            except (OSError, ValueError) as exc:  # Tantivy says ENOSPC in a ValueError
                if is_disk_full(exc, str(folder.parent)):
                    raise DiskFullError(name, str(folder)) from None
                raise
    register_analyzers(index)
    return index, chunk_chars
