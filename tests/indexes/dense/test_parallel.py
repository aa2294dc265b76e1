"""indexes/dense/parallel.py and costs.py: a build embeds on a pool of processes (the same vectors
as in process, in order) once a round is large enough, and says what it cost, extrapolated."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexes.dense import sync
from indexes.dense.config import DenseChoices, DenseConfig
from indexes.dense.index import HybridStore
from indexes.dense.parallel import build_workers
from indexes.dense.providers import LocalEmbedder
from indexes.dense.sync import indexed_chunks
from indexes.dense.vectors import load_current
from indexes.store import IndexStore
from tests.support.documents import HYBRID_DOCS

USE = DenseConfig(provider="local", model="use-multilingual-v3")


def test_a_build_uses_every_core_from_a_large_round_and_prints_its_costs(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new index of a store with the default settings is hybrid; with the pool threshold
    lowered to this small build, its chunks are embedded on two processes, and the report says
    so, with CPU per 1,000 chunks and disk and memory per 100k chunks."""
    monkeypatch.setattr(sync, "POOL_FROM", 2)
    monkeypatch.setattr(sync, "build_workers", lambda: 2)
    store = HybridStore(tmp_path, dense=DenseChoices(default=USE))
    index = store.create_or_open_for_write("docs")
    index.ingest(HYBRID_DOCS, progress=False)
    report = index.last_dense_report  # type: ignore[attr-defined]
    assert report.embedded == len(HYBRID_DOCS) and report.costs is not None
    costs = report.costs
    assert costs.workers == 2 and costs.embedded == len(HYBRID_DOCS) and costs.cpu_per_1000 is not None
    assert costs.cpu_per_1000 > 0 and costs.disk_bytes > 0 and costs.worker_bytes > 0
    line = report.line("docs")
    assert "CPU-s per 1,000 chunks on 2 processes" in line
    assert f"per 100k chunks, extrapolated from this build's {len(HYBRID_DOCS)}: vectors" in line
    assert "MB of memory per worker" in line
    vectors = load_current(tmp_path / "docs", view=False)  # the pool's vectors are the model's, in order
    assert vectors is not None
    searcher = index._index.searcher()  # type: ignore[attr-defined]
    for doc in HYBRID_DOCS:
        for chunk_id, text in indexed_chunks(searcher, index._schema, doc.id):  # type: ignore[attr-defined]
            key = next(k for k, (c, _) in vectors.chunk_of.items() if c == chunk_id)
            assert np.allclose(vectors.vectors([key])[0], LocalEmbedder(USE).embed_passages([text])[0], atol=1e-5)
    store.close()


def test_an_index_built_lexical_stays_lexical_until_embedded(tmp_path: Path) -> None:
    IndexStore(tmp_path).create_or_open_for_write("old").ingest(HYBRID_DOCS, progress=False)
    store = HybridStore(tmp_path, dense=DenseChoices(default=USE))
    assert store.dense_for("old") is None and type(store.open("old")).__name__ == "KnowledgeIndex"
    assert store.dense_for("new", creating=True) == USE
    store.close()


def test_a_build_embeds_on_the_cores_it_may_run_on() -> None:
    assert 1 <= build_workers()
