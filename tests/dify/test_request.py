"""gateway/dify/request.py: Dify's request read tolerantly where Dify varies, strictly where a
value would change the answer (each refusal names its field)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.core.config import DifyConfig
from gateway.core.errors import DifyError
from gateway.core.validate import Fields
from gateway.dify.request import Retrieval, read
from indexes.types import MetaCondition, MetaFilter

CFG = DifyConfig(max_top_k=10, default_top_k=4)


def _read(**over: Any) -> Retrieval:
    body: dict[str, Any] = {"knowledge_id": "kb", "query": "密钥", **over}
    return read(Fields(body, "", lambda p: DifyError("dify.request_invalid", p.message)), CFG)


def _where(*conds: tuple[str, str, Any], logic: Any = "and") -> MetaFilter | None:
    return _read(metadata_condition={"logical_operator": logic, "conditions": [
        {"name": n, "comparison_operator": op, "value": v} for n, op, v in conds]}).where


def test_plain_request_and_unknown_fields_ignored() -> None:
    r = _read(retrieval_setting={"top_k": 2, "score_threshold": 0.3, "score_threshold_enabled": True}, extra=1)
    assert (r.knowledge_id, r.query, r.top_k, r.score_threshold, r.where, r.skipped) == ("kb", "密钥", 2, 0.3, None, 0)


@pytest.mark.parametrize(("setting", "top_k", "threshold"), [
    (None, 4, 0.0), ({}, 4, 0.0), ({"top_k": None, "score_threshold": None}, 4, 0.0), ({"top_k": 1}, 1, 0.0),
    ({"top_k": 3.0}, 3, 0.0), ({"top_k": 1000}, 10, 0.0), ({"top_k": 2**70}, 10, 0.0), ({"top_k": 1e300}, 10, 0.0),
    ({"score_threshold": 0}, 4, 0.0), ({"score_threshold": 1}, 4, 1.0), ({"score_threshold": 0.5}, 4, 0.5),
])
def test_top_k_and_threshold_read_and_top_k_clamped_to_the_maximum(setting: Any, top_k: int,
                                                                   threshold: float) -> None:
    r = _read(retrieval_setting=setting)
    assert (r.top_k, r.score_threshold) == (top_k, threshold)


@pytest.mark.parametrize(("setting", "says"), [
    ({"top_k": 0}, "retrieval_setting.top_k must be a positive integer"),
    ({"top_k": -3}, "retrieval_setting.top_k must be a positive integer"),
    ({"top_k": 3.7}, "retrieval_setting.top_k must be a positive integer"),
    ({"top_k": True}, "retrieval_setting.top_k must be a positive integer"),
    ({"top_k": "5"}, "retrieval_setting.top_k must be a positive integer"),
    ({"top_k": float("inf")}, "retrieval_setting.top_k must be a positive integer"),
    ({"score_threshold": 2}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
    ({"score_threshold": -1}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
    ({"score_threshold": 1.0000001}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
    ({"score_threshold": float("nan")}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
    ({"score_threshold": True}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
    ({"score_threshold": "0.5"}, "retrieval_setting.score_threshold must be a number from 0 to 1"),
])
def test_settings_outside_their_range_are_refused_like_a_wrong_type(setting: dict[str, Any], says: str) -> None:
    # score_threshold 2 used to be clamped to 1 (an empty answer), -1 to 0; top_k 0 to 1.
    with pytest.raises(DifyError) as exc:
        _read(retrieval_setting=setting)
    assert exc.value.code == "dify.request_invalid" and exc.value.message == says


def test_no_narrowing_forms() -> None:
    assert _read(metadata_condition=None).where is None
    assert _read(metadata_condition={"logical_operator": "and", "conditions": None}).where is None
    assert _read(metadata_condition={"logical_operator": None, "conditions": []}).where is None
    assert _read(metadata_condition={}).where is None


def test_conditions_read_as_dify_means_them() -> None:
    w = _where(("a", "!=", "x"), ("b", ">=", 3), ("c", "<=", "2024-01-01"), ("d", "in", "x, y,,z"),
               ("e", "not in", ["p", 2, True]), ("f", "is", False), ("g", "empty", None), ("h", "not empty", "ignored"),
               logic=None)
    assert w == MetaFilter("and", (
        MetaCondition("a", "≠", "x"), MetaCondition("b", "≥", 3), MetaCondition("c", "≤", "2024-01-01"),
        MetaCondition("d", "in", ("x", "y", "z")), MetaCondition("e", "not in", ("p", 2, "true")),
        MetaCondition("f", "is", "false"), MetaCondition("g", "empty"), MetaCondition("h", "not empty")))
    assert _where(("a", "in", 5)) == MetaFilter("and", (MetaCondition("a", "in", (5,)),))


def test_null_values_are_skipped_as_dify_skips_them() -> None:
    r = _read(metadata_condition={"logical_operator": "or", "conditions": [
        {"name": "a", "comparison_operator": "is", "value": None},
        {"name": "b", "comparison_operator": "contains"},
        {"name": "c", "comparison_operator": "is", "value": "x"}]})
    assert r.where == MetaFilter("or", (MetaCondition("c", "is", "x"),)) and r.skipped == 2
    only_null = _read(metadata_condition={"conditions": [{"name": "a", "comparison_operator": "=", "value": None}]})
    assert only_null.where is None and only_null.skipped == 1


@pytest.mark.parametrize(("op", "value"), [
    ("contains", "x"), ("not contains", 3), ("start with", "x"), ("end with", "x"), ("is", "x"), ("is not", 1.5),
    ("empty", None), ("not empty", None), ("in", ["x"]), ("not in", "x,y"), ("=", 1), ("≠", "abc"), (">", 1),
    ("<", "2.5"), ("≥", "2024-01-01"), ("≤", 0), ("before", 1_700_000_000), ("after", "2024-01-01T08:00:00+08:00"),
])
def test_every_dify_operator_is_accepted(op: str, value: Any) -> None:
    w = _where(("name", op, value))
    assert w is not None and w.conditions[0].operator == op


def test_non_finite_values_refused() -> None:
    for value in (float("inf"), [float("nan")]):
        with pytest.raises(DifyError) as exc:
            _where(("a", "in", value))
        assert "conditions[0].value" in exc.value.message and "finite" in exc.value.message


@pytest.mark.parametrize("op", [">", "<", "≥", "≤", ">=", "<="])
@pytest.mark.parametrize("value", ["1e309", "-1e309", "inf", "Infinity", "nan"])
def test_a_number_no_double_holds_is_refused_for_a_comparison(op: str, value: str) -> None:
    # "1e309" used to be read as infinity (every number is below it) where "inf" was refused.
    with pytest.raises(DifyError) as exc:
        _where(("version", op, value))
    assert exc.value.message.startswith("metadata_condition.conditions[0].value must be a finite number or an "
                                        "ISO-8601 date for")
    assert _where(("version", "=", value)) == MetaFilter("and", (MetaCondition("version", "=", value),))  # text


@pytest.mark.parametrize(("over", "field"), [
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "≈", "value": 1}]}},
     "comparison_operator"),
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": 5, "value": 1}]}},
     "comparison_operator"),
    ({"metadata_condition": {"conditions": ["a"]}}, "conditions[0] must be an object"),
    ({"metadata_condition": {"conditions": [{"name": "a" * 257, "comparison_operator": "is", "value": 1}]}},
     "conditions[0].name"),
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "is", "value": "x" * 1025}]}},
     "conditions[0].value"),
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "in", "value": ["x"] * 101}]}},
     "conditions[0].value"),
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "in", "value": [{"x": 1}]}]}},
     "conditions[0].value[0]"),
    ({"metadata_condition": {"conditions": [{"name": "a", "comparison_operator": "is", "value": 1}] * 33}},
     "metadata_condition.conditions"),
    ({"query": "x" * 2001}, "query"),
    ({"knowledge_id": "k" * 129}, "knowledge_id"),
])
def test_refusals_name_the_field(over: dict[str, Any], field: str) -> None:
    with pytest.raises(DifyError) as exc:
        _read(**over)
    assert exc.value.code == "dify.request_invalid" and field in exc.value.message


def test_a_query_of_zero_width_and_ideographic_spaces_is_empty() -> None:
    with pytest.raises(DifyError, match="query must not be empty"):
        _read(query="\u200b\u3000\u200d")
