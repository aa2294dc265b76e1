"""bench/query_costs.py (`python -m bench.costs queries`): every stage is timed and the
--against column runs another tree's code in a subprocess. Figures are printed, never judged."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bench import costs
from bench.query_costs import STAGES, measure

CORPORA = Path(__file__).parents[2].parent / "shared" / "corpora"
pytestmark = pytest.mark.skipif(not (CORPORA / "cmrc2018").is_dir(), reason="shared corpora absent")


def test_measure_times_every_stage_of_a_real_search() -> None:
    got = measure("cmrc2018", limit=5, passes=1, max_queries=20)
    assert got["queries"] == 20
    assert all(got[s] > 0 for s in STAGES)
    assert 1 <= got["loads_per_query"] <= 5 * 8  # each result's best chunk, at most 8 per result
    assert got["searches_per_query"] >= 1


def test_table_against_another_tree(capsys: pytest.CaptureFixture[str]) -> None:
    here = Path(__file__).resolve().parents[2]
    assert costs.main(["queries", "--corpus", "cmrc2018", "--passes", "1", "--max-queries", "10",
                       "--against", str(here), "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    for stage in STAGES:
        row = re.search(rf"^\| {stage} \| ([\d,]+) \| ([\d,]+) \| ([\d.]+) \|$", out, re.M)
        assert row is not None, out
        assert int(row[1].replace(",", "")) > 0 and int(row[2].replace(",", "")) > 0
    assert "| stored chunks loaded per query |" in out
