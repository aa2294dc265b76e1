"""The bm25s + rjieba baseline, on the same chunks as the index.

Uses `indexes.evaluation.Bm25sBaseline` (the recipe `kbgate eval` compares against) when
that module is present; otherwise an identical local copy of the recipe: text normalized
with `indexes.analysis.normalize`, tokenized with `rjieba.cut`, bm25s BM25 with default
parameters, top-k chunks returned. Each of our chunks is given as its own document with a
chunk size larger than any chunk, so bm25s sees exactly the chunks Tantivy indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from indexes.analysis import normalize
from indexes.ingest import chunk
from indexes.types import Document, Section

__all__ = ["Bm25sBaseline", "SOURCE", "as_chunk_documents"]

try:
    from indexes.evaluation import Bm25sBaseline  # type: ignore[import-not-found, unused-ignore]

    SOURCE = "indexes.evaluation.Bm25sBaseline"
except ImportError:  # the module is not on every branch yet
    SOURCE = "bench.baseline (same recipe as indexes.evaluation.Bm25sBaseline)"

    def _jieba_tokens(text: str) -> list[str]:
        import rjieba

        return [t for t in rjieba.cut(normalize(text)) if t.strip()]

    class Bm25sBaseline:  # type: ignore[no-redef]
        """bm25s.BM25 over fixed `chunk_chars`-character pieces of each document's text."""

        def __init__(self, documents: Iterable[Document], chunk_chars: int = 300) -> None:
            import bm25s

            self._doc_ids: list[str] = []
            self._texts: list[str] = []
            for doc in documents:
                text = f"{doc.title}\n{doc.text}" if doc.title else doc.text
                for start in range(0, max(len(text), 1), chunk_chars):
                    self._doc_ids.append(doc.id)
                    self._texts.append(text[start : start + chunk_chars])
            self._vocab: dict[str, int] = {}
            corpus_ids = [
                [self._vocab.setdefault(t, len(self._vocab)) for t in _jieba_tokens(text)]
                for text in self._texts
            ]
            self._tokenized = bm25s.tokenization.Tokenized
            self._bm25 = bm25s.BM25()
            self._bm25.index(self._tokenized(ids=corpus_ids, vocab=self._vocab), show_progress=False)

        def search(self, query: str, k: int) -> list[tuple[str, str]]:
            ids = [self._vocab[t] for t in _jieba_tokens(query) if t in self._vocab]
            if not ids or k <= 0:
                return []
            k = min(k, len(self._texts))
            found, _scores = self._bm25.retrieve(
                self._tokenized(ids=[ids], vocab=self._vocab), k=k, show_progress=False
            )
            return [(self._doc_ids[i], self._texts[i]) for i in found[0].tolist()]


CHUNK_CHARS_ALL = 1_000_000
"""Chunk size handed to the baseline: larger than any chunk, so it never re-cuts one."""


def as_chunk_documents(documents: Iterable[Document]) -> Iterator[Document]:
    """One Document per chunk of each document (title kept, heading + text as the body)."""
    for doc in documents:
        for c in chunk(doc):
            yield Document(id=doc.id, title=doc.title, sections=(Section(c.heading, c.text),))
