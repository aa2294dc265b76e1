"""gateway/core/errors.py: the Ret table is stable, distinct, and equal to its copy in
docs/volcengine-console.md (and the Dify table to docs/dify.md's, the document API's codes to
docs/document-api.md's)."""

from __future__ import annotations

import re

from gateway.core.errors import (
    ACCESS_TOOL_CODES,
    AGENT_CODES,
    DIFY_TABLE,
    DOCUMENT_CODES,
    MCP_CODES,
    RET_TABLE,
    CallbackError,
    ConfigError,
    DifyError,
    DocumentError,
    ToolError,
)
from tests.support.paths import ROOT


def test_codes_distinct_and_statuses_of_their_class() -> None:
    rets = [r.ret for r in RET_TABLE]
    reasons = [r.reason for r in RET_TABLE]
    assert len(set(rets)) == len(rets) and len(set(reasons)) == len(reasons)
    for r in RET_TABLE:
        if r.ret:
            assert r.ret // 100 == r.status, r  # 401xx ↔ HTTP 401


def test_docs_ret_table_matches() -> None:
    text = (ROOT / "docs" / "volcengine-console.md").read_text("utf-8")
    block = text.split("<!-- ret-table:start -->")[1].split("<!-- ret-table:end -->")[0]
    rows = re.findall(r"^\| (\d+) \| (\d+) \| `([a-z0-9_]+)` \|", block, re.M)
    assert [(int(a), int(b), c) for a, b, c in rows] == [(r.ret, r.status, r.reason) for r in RET_TABLE]


def test_docs_dify_table_matches() -> None:
    text = (ROOT / "docs" / "dify.md").read_text("utf-8")
    block = text.split("<!-- dify-table:start -->")[1].split("<!-- dify-table:end -->")[0]
    rows = re.findall(r"^\| (\d+) \| (\d+) \| `([a-z_]+)` \|", block, re.M)
    assert [(int(a), int(b), c) for a, b, c in rows] == [(r.error_code, r.status, r.reason) for r in DIFY_TABLE]


def test_dify_error_carries_its_number() -> None:
    e = DifyError("dify.knowledge_unknown")
    assert (e.error_code, e.status, e.code, e.retryable) == (2001, 404, "dify.knowledge_unknown", False)
    assert DifyError("dify.knowledge_unavailable").retryable


def test_error_carries_code_and_status() -> None:
    e = CallbackError("replayed")
    assert (e.ret, e.status, e.code) == (40901, 409, "replayed")
    c = ConfigError("tenants.a.path", "must be absolute")
    assert c.key == "tenants.a.path" and "tenants.a.path" in c.message


def test_docs_tool_codes_table_matches() -> None:
    text = (ROOT / "docs" / "agent-developers.md").read_text("utf-8")
    block = text.split("<!-- tool-codes:start -->")[1].split("<!-- tool-codes:end -->")[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (\d+) \| (yes|no|depends) \|", block, re.M)
    assert [(c, int(h)) for c, h, _ in rows] == [(c, h) for c, (h, _, _) in ACCESS_TOOL_CODES.items()]
    for c, _, r in rows:
        assert r == ("depends" if c == "access.tool_failed" else "yes" if ACCESS_TOOL_CODES[c][1] else "no"), c


def test_an_oversized_tool_request_is_413() -> None:
    e = ToolError("access.request_too_large")
    assert (e.status, e.retryable) == (413, False)


def test_docs_document_codes_table_matches() -> None:
    text = (ROOT / "docs" / "document-api.md").read_text("utf-8")
    block = text.split("<!-- document-codes:start -->")[1].split("<!-- document-codes:end -->")[0]
    rows = re.findall(r"^\| `([a-z_.]+)` \| (\d+) \| (yes|no) \|", block, re.M)
    assert [(c, int(h), r == "yes") for c, h, r in rows] == [(c, h, retry) for c, (h, retry, _) in
                                                             DOCUMENT_CODES.items()]


def test_document_errors_carry_retry_hints() -> None:
    busy = DocumentError("documents.writer_busy", retry_after=1.0)
    assert (busy.status, busy.retryable, busy.retry_after) == (503, True, 1.0)
    assert DocumentError("documents.embedding_failed", retryable=False).retryable is False
    assert not set(DOCUMENT_CODES) & (set(ACCESS_TOOL_CODES) | set(MCP_CODES) | set(AGENT_CODES))
