"""bench: the harness runs end to end at a tiny scale and prints the expected tables.

2,000 chunks, 1-second loads: this proves the harness works (index build, search beside
bm25s, kbgate and the floor over HTTP with real Redis, worker memory, targets), not how
fast anything is, so no timing is asserted; figures only have to be positive.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench.corpus import documents, load_pool, parse_scale, scale_label
from bench.run import main
from indexes.ingest import chunk
from tests.support.paths import corpora_or_skip

pytestmark = pytest.mark.corpus


def _table(md: str, heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first table after the '### heading' line."""
    section = md.split(f"### {heading}", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    end = next((i for i, line in enumerate(section.splitlines()) if line.startswith("### ")), None)
    if end is not None:
        rows = [line for line in section.splitlines()[:end] if line.startswith("|")]
    return [[c.strip() for c in r.strip("|").split("|")] for r in rows if not re.fullmatch(r"[|\-: ]+", r)]


def _number(cell: str) -> float:
    return float(cell.replace(",", "").rstrip("×"))


def test_scales_parse_and_print() -> None:
    assert parse_scale("10k") == 10_000 and parse_scale("1m") == 1_000_000 and parse_scale("2000") == 2000
    assert scale_label(100_000) == "100k" and scale_label(2500) == "2500"
    with pytest.raises(ValueError):
        parse_scale("lots")


def test_scaled_corpus_has_exactly_the_chunks_asked_for() -> None:
    corpora_or_skip()
    pool = load_pool()
    for n in (150, len(pool.real) * 3):  # below and above the real corpus's documents
        docs = list(documents(n, pool))
        assert sum(len(chunk(d)) for d in docs) == n
        assert len({d.id for d in docs}) == len(docs)
    assert list(documents(500, pool)) == list(documents(500, pool))  # deterministic


def test_harness_prints_every_table_with_positive_figures(
    redis_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    corpora_or_skip()
    monkeypatch.setenv("REDIS_URL", redis_url)
    code = main(["--only", "--scale", "2000", "--seconds", "1", "--warmup", "0.3", "--search-seconds", "0.3",
                 "--connections", "2,4", "--out", str(tmp_path)])
    assert code == 0
    md = capsys.readouterr().out
    assert sorted(p.suffix for p in tmp_path.glob("bench-*")) == [".json", ".md"]
    assert (tmp_path / next(tmp_path.glob("bench-*.md")).name).read_text(encoding="utf-8").strip() == md.strip()

    build = _table(md, "Index build")
    assert build[0][:5] == ["scale", "chunks", "documents", "build s", "chunks/s"]
    assert len(build) == 2 and build[1][0] == "2k" and build[1][1] == "2,000"
    assert all(_number(c) > 0 for c in build[1][1:])

    search = _table(md, "Search alone")
    assert search[0] == ["scale", "engine", "threads", "queries/s", "p50 ms", "p99 ms", "kbgate ÷ bm25s"]
    engines = {(r[1], r[2]) for r in search[1:]}
    assert engines == {("kbgate", "1"), ("kbgate", "2"), ("bm25s+rjieba", "1"), ("bm25s+rjieba", "2")}
    assert all(_number(r[3]) > 0 and _number(r[4]) > 0 for r in search[1:])

    e2e = _table(md, "End to end")
    assert e2e[0][:6] == ["scale", "server", "connections", "req/s", "p50 ms", "p99 ms"]
    seen = {(r[1], r[2]) for r in e2e[1:]}
    assert seen == {("floor (bare Starlette)", "2"), ("floor (bare Starlette)", "4"), ("kbgate", "2"), ("kbgate", "4")}
    for r in e2e[1:]:
        assert _number(r[3]) > 0 and _number(r[5]) > 0
        assert r[7] == "0" and r[8] == "0", f"non-2xx or errors in {r}"  # every callback answered Ret 0
        if r[1] == "kbgate":
            assert _number(r[9]) > 0  # ratio to the floor

    memory = _table(md, "Memory per hypercorn worker")
    kb = next(r for r in memory[1:] if r[1] == "kbgate")
    assert kb[2] == "2" and all(float(x) > 0 for x in kb[3].split(", "))

    targets = _table(md, "Targets")
    assert targets[0] == ["target", "measured", "met"]
    assert len(targets) == 7 and all(r[2] in ("yes", "NO", "not run") for r in targets[1:])
