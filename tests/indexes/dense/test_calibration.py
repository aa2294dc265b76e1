"""The cosine line measured for an index's vectors (indexes/dense/calibration.py), with the
embedded USE model: measured at the build and stored beside the vectors, deterministic,
carried over by small upserts, overridden by the config, and measured on demand for vectors
built before it was (`HybridIndex.calibrate`). The served model's line is tested against a
real HTTP embeddings server in tests/e2e/test_served_cosine_line.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from indexes.dense.calibration import LINE_FILE, MIN_DOCUMENTS, CosineLine, effective, measure, probe_texts, still_fits
from indexes.dense.config import COSINE_LINES, DenseConfig
from indexes.dense.index import HybridIndex, HybridStore
from indexes.dense.vectors import load_current
from indexes.types import Document, Section
from tests.support.documents import CALIBRATION_DOCS

USE = DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=10_000)

DOCS = CALIBRATION_DOCS


def build(root: Path, dense: DenseConfig = USE, docs: list[Document] = DOCS) -> HybridIndex:
    ix = HybridStore(root, dense={"kb": dense}).create_or_open_for_write("kb")
    assert isinstance(ix, HybridIndex)
    ix.ingest(docs, progress=False)
    return ix


def test_building_the_vectors_measures_and_stores_the_line(tmp_path: Path) -> None:
    ix = build(tmp_path)
    try:
        line = ix.cosine_line()
        assert line.source == "measured" and ix.last_dense_report is not None
        assert ix.last_dense_report.cosine_line == line
        current = load_current(ix.path)
        assert current is not None and (current.folder / LINE_FILE).is_file() and current.line == line
        assert 0.0 < line.zero < line.one < 1.0  # USE's band, read off this corpus
        assert line.probes >= 2 * MIN_DOCUMENTS and line.chunks == len(DOCS)
    finally:
        ix.close()


def test_the_line_is_deterministic(tmp_path: Path) -> None:
    a, b = build(tmp_path / "a"), build(tmp_path / "b")
    try:
        assert a.cosine_line() == b.cosine_line()
    finally:
        a.close()
        b.close()


def test_a_small_upsert_keeps_the_line_and_a_new_model_measures_again(tmp_path: Path) -> None:
    ix = build(tmp_path)
    try:
        before = ix.cosine_line()
        ix.ingest([Document("extra", "连接池", (Section("", "连接池限制同时打开的连接数。"),), path="extra")],
                  progress=False)
        assert ix.cosine_line() == before  # carried over: 13 chunks is within twice the 12 measured
    finally:
        ix.close()


def test_a_set_grown_past_twice_its_measured_size_is_measured_again() -> None:
    line = CosineLine(0.3, 0.6, "measured", chunks=100)
    assert still_fits(line, 100) and still_fits(line, 200) and still_fits(line, 50)
    assert not still_fits(line, 201) and not still_fits(line, 49)
    assert not still_fits(None, 100) and not still_fits(CosineLine(0.3, 0.6, "model"), 100)


def test_too_few_documents_keep_the_models_line(tmp_path: Path) -> None:
    ix = build(tmp_path, docs=DOCS[:MIN_DOCUMENTS - 1])
    try:
        assert ix.cosine_line() == CosineLine(*COSINE_LINES["use-multilingual-v3"], source="model")
        assert ix.last_dense_report is not None and "not measured" in ix.last_dense_report.line("kb")
    finally:
        ix.close()


def test_the_config_overrides_the_measured_line(tmp_path: Path) -> None:
    build(tmp_path).close()
    mine = DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=10_000,
                       cosine_zero=0.41, cosine_one=0.77)
    ix = HybridStore(tmp_path, dense={"kb": mine}).open("kb")
    try:
        assert isinstance(ix, HybridIndex)
        assert ix.cosine_line() == CosineLine(0.41, 0.77, "config")
    finally:
        ix.close()


def test_one_end_set_by_hand_keeps_the_other_measured() -> None:
    measured = CosineLine(0.2, 0.5, "measured", chunks=10)
    only_zero = DenseConfig(provider="local", model="use-multilingual-v3", cosine_zero=0.25)
    assert effective(only_zero, measured) == CosineLine(0.25, 0.5, "config")
    past = DenseConfig(provider="local", model="use-multilingual-v3", cosine_zero=0.6)  # above the measured one
    line = effective(past, measured)
    assert line.zero == 0.6 and line.one > line.zero
    assert effective(DenseConfig(provider="local", model="use-multilingual-v3"), measured) == measured
    assert effective(DenseConfig(provider="local", model="use-multilingual-v3"), None).source == "model"


def test_vectors_built_before_the_line_was_measured_keep_todays_line_until_calibrated(tmp_path: Path) -> None:
    ix = build(tmp_path)
    measured = ix.cosine_line()
    current = load_current(ix.path)
    assert current is not None
    (current.folder / LINE_FILE).unlink()  # as an index built before the line was measured
    ix.close()
    old = HybridStore(tmp_path, dense={"kb": USE}).open("kb")
    assert isinstance(old, HybridIndex)
    try:
        assert old.cosine_line() == CosineLine(*COSINE_LINES["use-multilingual-v3"], source="model")
        assert old.calibrate() == measured
        assert old.cosine_line() == measured and (current.folder / LINE_FILE).is_file()
    finally:
        old.close()


def test_each_probe_is_read_against_its_own_chunk_and_the_chunks_of_other_documents_only() -> None:
    """Two probes per chunk (title, first sentence); unrelated pairs never within a document."""
    rng = np.random.default_rng(7)
    base = rng.normal(size=(40, 16)).astype(np.float32)
    base /= np.linalg.norm(base, axis=1, keepdims=True)
    chunks = [(f"d{i}#0", f"d{i}") for i in range(40)]
    texts = {f"d{i}#0": (f"t{i}", "", f"第{i}段的第一句话说明了它的内容。") for i in range(40)}
    probes = {t: base[i] * 0.8 + rng.normal(size=16).astype(np.float32) * 0.2
              for i, (title, _, text) in enumerate(texts.values()) for t in probe_texts(title, "", text)}

    def unit(v: np.ndarray) -> np.ndarray:
        return (v / np.linalg.norm(v)).astype(np.float32)

    line = measure(chunks, lambda at: base[list(at)], lambda ids: [texts[i] for i in ids], lambda t: unit(probes[t]))
    assert line is not None and line.source == "measured" and -1.0 < line.zero < line.one <= 1.0
    assert line.probes == 80 and line.pairs == 80 * 39
