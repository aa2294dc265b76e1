"""gateway/dify/wire.py: every error of the frame and the core becomes Dify's code."""

from __future__ import annotations

import pytest

from gateway.core.errors import DIFY_TABLE, AccessDenied, AgentError, BadCredentials, DifyError, KnowledgeError
from gateway.core.validate import Problem
from gateway.dify.wire import DifyWire, as_dify


@pytest.mark.parametrize(("err", "code"), [
    (BadCredentials("a Bearer token is required", malformed=True), 1001),
    (BadCredentials("the Bearer token is not valid", malformed=False), 1002),
    (AccessDenied("access.forbidden_tool", "no"), 1002),
    (AccessDenied("access.unauthorized", "caller mismatch"), 1002),
    (AccessDenied("access.forbidden_scope", "the route is not allowed for this client"), 2001),
    (AccessDenied("access.dataset_not_allowed", "the route and the policy share no dataset"), 2001),
    (KnowledgeError("knowledge_unavailable"), 5000),
    (AgentError("internal", "internal error"), 5000),
    (DifyError("dify.body_empty"), 4001),
])
def test_as_dify(err: AgentError, code: int) -> None:
    assert as_dify(err, "kb").error_code == code


@pytest.mark.parametrize(("kind", "code"), [("media", 4150), ("too_large", 4130), ("timeout", 4080), ("json", 4000),
                                            ("utf8", 4000), ("object", 4000), ("missing", 4000), ("type", 4000)])
def test_problem_kinds(kind: str, code: int) -> None:
    err = DifyWire().invalid(Problem("body", kind, "is wrong"))  # type: ignore[arg-type]
    assert err.error_code == code and "body is wrong" in err.message


def test_table_codes_distinct_and_of_their_status() -> None:
    codes = [r.error_code for r in DIFY_TABLE]
    assert len(set(codes)) == len(codes) and len({r.reason for r in DIFY_TABLE}) == len(DIFY_TABLE)
    assert {(r.error_code, r.status) for r in DIFY_TABLE if r.error_code < 4000} == {(1001, 403), (1002, 403),
                                                                                     (2001, 404)}
    assert all(r.error_code // 10 == r.status for r in DIFY_TABLE if r.error_code >= 4000)
