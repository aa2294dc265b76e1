"""gateway/core/errors.py: the Ret table is stable, distinct, and equal to its copy in
docs/volcengine-console.md (and the Dify table to docs/dify.md's)."""

from __future__ import annotations

import re

from gateway.core.errors import DIFY_TABLE, RET_TABLE, CallbackError, ConfigError, DifyError
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
