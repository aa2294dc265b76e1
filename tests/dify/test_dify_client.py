"""End to end: Dify's own calls (tests/dify/client.py) against a real `kbgate serve` with two
workers and Redis on a free port — registration, retrieval with metadata_condition null and
with every operator, top_k stuck at defaults, thresholds — every body Dify sends and every
answer checked against gateway/dify/schemas, then the audit lines and /metrics."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gateway.dify.schemas import load
from tests.dify.client import Dify, RegistrationFailed, condition
from tests.dify.conftest import DIFY_KEY, KEYS, NARROW_KEY, NOGRANT_KEY, VISIBLE, audit_lines, check
from tests.support.harness import Server

KR, RP, DP, BK = "guide/key-rotation.md", "guide/replay.md", "ops/deploy.md", "ops/backup.md"

# Every operator Dify documents (and the ASCII spellings its own filter takes), with the
# documents of the handbook they leave (tests/dify/conftest.py HANDBOOK).
OPERATORS: list[tuple[str, str, Any, set[str]]] = [
    ("author", "contains", "三", {KR}),
    ("author", "not contains", "三", {RP, DP}),
    ("path", "start with", "ops/", {DP, BK}),
    ("title", "end with", "防护", {RP}),
    ("tags", "is", "运维", {KR}),
    ("author", "is not", "李四", {KR, DP}),
    ("author", "empty", None, {BK}),
    ("url", "not empty", None, {KR}),
    ("author", "in", ["李四", "王五"], {RP, DP}),
    ("author", "not in", "李四,王五", {KR}),
    ("version", "=", 3, {KR}),
    ("version", "≠", 3, {RP}),
    ("version", ">", 3, {RP}),
    ("version", "<", 5.5, {KR}),
    ("version", "≥", 3, {KR, RP}),
    ("version", "≤", "3", {KR}),
    ("released", "before", "2024-01-01", {RP}),
    ("publish_time", "after", "2024-01-01", {KR}),
    ("version", "!=", 3, {RP}),
    ("version", ">=", 5.5, {RP}),
    ("version", "<=", 5.5, {KR, RP}),
]


@pytest.fixture(name="dify")
def _dify(dify_server: Server) -> Dify:
    """The endpoint an admin pastes into Dify: the server's base URL plus the prefix."""
    return Dify(dify_server.base + "/dify", DIFY_KEY)


def _sent_are_valid(d: Dify) -> None:
    for body in d.sent:
        jsonschema.validate(body, load("dify.retrieval-request"), cls=jsonschema.Draft202012Validator)


def _ids(recs: list[dict[str, Any]]) -> set[str]:
    return {r["metadata"]["document_id"] for r in recs}


def test_registration_passes_with_a_valid_key_and_fails_with_a_wrong_one(dify: Dify) -> None:
    r = dify.register()  # Dify's check: no body, no Content-Type
    assert r.status_code == 400 and check(r, "dify.error")["error_code"] == 4001
    for key, code in (("wrong-key-but-well-formed-123", 1002), (NOGRANT_KEY, 1002), ("short", 1001)):
        with pytest.raises(RegistrationFailed, match="Forbidden"):
            Dify(dify.endpoint, key).register()
        r = httpx.post(f"{dify.endpoint}/retrieval", headers={"Authorization": f"Bearer {key}"})
        assert check(r, "dify.error")["error_code"] == code
    with pytest.raises(RegistrationFailed, match="Not Found"):  # a wrong path pasted: Dify says so
        Dify(dify.endpoint + "/v1", DIFY_KEY).register()


def test_retrieval_with_metadata_condition_null(dify: Dify) -> None:
    r, recs = dify.retrieve("handbook", "旧密钥退役")
    assert check(r, "dify.retrieval-response")["records"] == recs
    assert recs[0]["metadata"]["document_id"] == KR and recs[0]["title"] == "密钥轮换"
    assert all(isinstance(x["metadata"]["document_id"], str) and x["metadata"]["document_id"] for x in recs)
    assert _ids(recs) <= VISIBLE
    _sent_are_valid(dify)


@pytest.mark.parametrize(("name", "op", "value", "expected"), OPERATORS)
def test_every_operator(dify: Dify, name: str, op: str, value: Any, expected: set[str]) -> None:
    r, recs = dify.retrieve("handbook", "密钥", metadata_condition=condition("and", [(name, op, value)]))
    check(r, "dify.retrieval-response")
    assert _ids(recs) == expected
    _sent_are_valid(dify)


def test_every_documented_operator_is_exercised() -> None:
    documented = {"contains", "not contains", "start with", "end with", "is", "is not", "empty", "not empty", "in",
                  "not in", "=", "≠", ">", "<", "≥", "≤", "before", "after"}
    assert documented <= {op for _, op, _, _ in OPERATORS}


def test_and_or_and_dify_defaults(dify: Dify) -> None:
    both = [("dataset", "is", "public"), ("author", "not empty", None)]
    assert _ids(dify.retrieve("handbook", "密钥", metadata_condition=condition("and", both))[1]) == {KR, DP}
    assert _ids(dify.retrieve("handbook", "密钥", metadata_condition=condition("or", both))[1]) == {KR, RP, DP, BK}
    # logical_operator null (the model's default is 'and'), conditions null: no narrowing
    assert _ids(dify.retrieve("handbook", "密钥", metadata_condition=condition(None, both))[1]) == {KR, DP}
    assert _ids(dify.retrieve("handbook", "密钥", metadata_condition=condition("and", None))[1]) == VISIBLE


def test_top_k_stuck_at_defaults(dify: Dify) -> None:
    assert len(dify.retrieve("handbook", "密钥", top_k=None)[1]) == 3  # [dify] default_top_k
    assert len(dify.retrieve("handbook", "密钥", top_k=2)[1]) == 2
    assert len(dify.retrieve("handbook", "密钥", top_k=10_000)[1]) == 4  # clamped to 5; 4 visible documents
    _sent_are_valid(dify)


def test_threshold_on_relevance_never_lowered(dify: Dify) -> None:
    query = "密钥轮换"  # matched to a different degree by several pages
    _, recs = dify.retrieve("handbook", query, top_k=5)
    assert len(recs) >= 2 and all(0 < x["score"] <= 1 for x in recs)
    second = sorted({x["score"] for x in recs}, reverse=True)[1]
    r, kept = dify.retrieve("handbook", query, top_k=5, threshold_enabled=True, score_threshold=second + 1e-6)
    assert r.status_code == 200 and kept == [x for x in recs if x["score"] > second]  # none let through to fill
    _, kept = dify.retrieve("handbook", query, top_k=5, threshold_enabled=True, score_threshold=second)
    assert [x["metadata"]["document_id"] for x in kept] == [x["metadata"]["document_id"] for x in recs
                                                             if x["score"] >= second]


def test_scope_narrowing_and_denial(dify: Dify) -> None:
    narrow = Dify(dify.endpoint, NARROW_KEY)
    assert _ids(narrow.retrieve("handbook", "密钥", top_k=5)[1]) == {KR}
    r, recs = narrow.retrieve("ops-only", "密钥")
    assert r.status_code == 404 and recs == [] and check(r, "dify.error")["error_code"] == 2001
    r, _ = dify.retrieve("off", "密钥")
    assert r.status_code == 503 and check(r, "dify.error")["error_code"] == 5030


def test_audit_lines_and_metrics_name_the_wing(dify: Dify, dify_server: Server) -> None:
    dify.retrieve("handbook", "密钥")
    Dify(dify.endpoint, "wrong-key-but-well-formed-123").retrieve("handbook", "密钥")
    root = dify_server.log_path.parent
    lines = [ln for ln in audit_lines(root) if ln["wing"] == "dify"]
    assert lines and all(ln["tool"] == "dify.retrieval" for ln in lines)
    assert any(ln["code"] == "dify.authorization_failed" for ln in lines)
    text = httpx.get(dify_server.base + "/metrics").text
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value
         for fam in text_string_to_metric_families(text) for s in fam.samples}
    passed = m[("kbgate_wing_requests_total", (("outcome", "passed"), ("wing", "dify")))]
    assert passed == sum(1 for ln in lines if ln["outcome"] == "passed")  # both workers' counts
    assert m[("kbgate_wing_errors_total", (("code", "dify.authorization_failed"), ("wing", "dify")))] >= 1
    log = (root / "audit.jsonl").read_text("utf-8") + dify_server.logs()
    assert not any(k in log or k in text for k in KEYS)
