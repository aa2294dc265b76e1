"""gateway/console/scores: a score never reads at or over a threshold it is under."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.console.gaps.record import verdict
from gateway.console.scores import cut, score_text


def test_a_near_miss_under_the_threshold_never_reads_as_the_threshold() -> None:
    assert score_text(0.296) == "0.296" and score_text(0.2996) == "0.299" and score_text(0.3) == "0.300"
    assert cut(0.29) == 0.29 and cut(0.2999996, 6) == 0.299999
    assert score_text(float("nan")) == "0.000"


@settings(max_examples=300, deadline=None)
@given(st.floats(0.0, 1.0), st.integers(0, 1000))
def test_what_reads_under_the_threshold_is_judged_under_it(relevance: float, milli: int) -> None:
    threshold = milli / 1000
    reads_under = cut(relevance) < cut(threshold)
    assert reads_under == (verdict([relevance], threshold) == "low_score")
