"""`kbgate index calibrate` (gateway/ops/calibrate.py), the real CLI: vectors built before their
cosine line was measured keep the model's line until it measures and stores theirs; a lexical
index and a missing one are refused with a clear message."""

from __future__ import annotations

from pathlib import Path

from indexes.dense.calibration import LINE_FILE
from indexes.dense.vectors import load_current
from tests.support.configs import config, write
from tests.support.documents import CALIBRATION_DOCS, as_jsonl
from tests.support.harness import kbgate


def site(tmp_path: Path) -> Path:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pages.jsonl").write_text(as_jsonl(CALIBRATION_DOCS), "utf-8")
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "pages.jsonl").write_text(as_jsonl(CALIBRATION_DOCS[:2]), "utf-8")
    data = config(tmp_path, dense={"docs": {"provider": "local", "model": "use-multilingual-v3"}}, lexical=["plain"])
    return write(tmp_path / "gateway.toml", data)


def test_calibrate_measures_the_line_of_vectors_built_without_one(tmp_path: Path) -> None:
    cfg = site(tmp_path)
    built = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(tmp_path / "docs"),
                   timeout=300)
    assert built.returncode == 0, built.stderr
    assert "(measured, 24 probes)" in built.stdout
    current = load_current(tmp_path / "indexes" / "docs")
    assert current is not None and current.line is not None
    measured = current.line
    (current.folder / LINE_FILE).unlink()  # as vectors built before the line was measured

    r = kbgate("index", "calibrate", "--config", str(cfg), "--index", "docs", timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"cosine line measured: {measured.zero:.4f} → relevance 0, {measured.one:.4f} → 1" in r.stdout
    assert "(measured)" in r.stdout
    again = load_current(tmp_path / "indexes" / "docs")
    assert again is not None and again.line == measured


def test_calibrate_refuses_a_lexical_index_and_a_missing_one(tmp_path: Path) -> None:
    cfg = site(tmp_path)
    assert kbgate("index", "add", "--config", str(cfg), "--index", "plain", "--no-progress",
                  str(tmp_path / "plain")).returncode == 0
    lexical = kbgate("index", "calibrate", "--config", str(cfg), "--index", "plain")
    assert lexical.returncode == 1 and "is not hybrid" in lexical.stderr
    missing = kbgate("index", "calibrate", "--config", str(cfg), "--index", "docs")
    assert missing.returncode == 1 and "no index docs" in missing.stderr
