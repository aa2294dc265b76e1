"""`kbgate try`'s text (gateway/console/try_cli.py): the cosine line a hybrid search judged on,
with its source, and how to measure a line that was not measured for the index."""

from __future__ import annotations

from gateway.console.try_cli import cosine_line_text


def test_the_cosine_line_says_where_it_came_from() -> None:
    measured = cosine_line_text({"zero": 0.2641, "one": 0.6471, "source": "measured"}, "docs")
    assert measured == "cosine line: 0.2641 → relevance 0, 0.6471 → 1 (measured: measured on this index's vectors)"
    assert "cosine_zero / cosine_one in the config" in cosine_line_text({"zero": 0.4, "one": 0.8, "source": "config"},
                                                                         "docs")
    model = cosine_line_text({"zero": 0.3, "one": 0.65, "source": "model"}, "docs")
    assert "not measured for this index" in model and "kbgate index calibrate --config FILE --index docs" in model
