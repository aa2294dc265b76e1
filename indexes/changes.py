"""The one way a change reaches an index outside `kbgate index add`: `apply_changes`.

A sync source (`kbgate sync`, gateway/ops/sync) and the document API both hand it what to
upsert and what to delete; it applies both through the index's single writer in one Tantivy
commit, so readers see all of it or none of it (a crash before the commit applies nothing):
- an upsert is keyed by document id; its revision (`indexes.records.document_revision`, a
  SHA-256 of everything indexed) is its content hash, so a document whose revision the index
  holds is not rewritten, and on a hybrid index not re-embedded (`indexes.dense.sync`);
- a delete names a document id; one the index does not hold is no change;
- a run that changes nothing does not commit: the generation does not move.
Documents keep the rules of `indexes.writer.ingest`: one whose id another dataset holds is
refused, and so is one the index holds from another source unless `replace`.
"""

from __future__ import annotations

from collections.abc import Iterable

from .documents import holders
from .store import KnowledgeIndex
from .types import Document, IngestError, IngestReport, IngestWarning

__all__ = ["apply_changes", "ids_from_source"]


def apply_changes(index: KnowledgeIndex, upserts: Iterable[Document | IngestError | IngestWarning] = (),
                  deletes: Iterable[str] = (), *, replace: bool = False, progress: bool = False) -> IngestReport:
    """Upsert `upserts` by id and delete the ids `deletes`, in one commit; returns what changed
    (`IngestReport`: added, updated, unchanged, deleted, chunks, the errors and warnings of the
    input, and `generation`, the commit opstamp after the run).

    upserts: Documents with their final ids (a reader's IngestErrors / IngestWarnings may be
    mixed in: they are reported). An id both upserted and deleted is upserted. replace: let a
    document replace one the index holds from another source. Raises IndexLockedError when
    another writer holds the index, EmbeddingError when a hybrid index's provider fails (then
    nothing was committed).
    """
    report = index.ingest(upserts, delete=list(deletes), progress=progress, replace=replace)
    report.generation = index.generation
    return report


def ids_from_source(index: KnowledgeIndex, prefix: str) -> dict[str, str]:
    """doc_id → source of every document in the index whose source (`Document.source`) starts
    with `prefix`: what a sync source indexed, so a file or page it no longer finds is deleted
    even when its own record of what it saw was lost."""
    index.maybe_reload(force=True)
    found = holders(index._index.searcher(), index._schema)  # the store's own reader: same package
    return {doc_id: source for doc_id, (_, source) in found.items() if source.startswith(prefix)}
