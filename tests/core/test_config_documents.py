"""The document API's configuration: `[documents]` (gateway.core.config.documents) and a client's
`write_indexes` with the grant `documents.write` (gateway.core.config.agent)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import DocumentsConfig, load_config, parse_config
from gateway.core.principals import token_hash
from tests.core.test_config import ENV, base, refused
from tests.support.paths import ROOT

REF = {"KBGATE_REF_KEY": "r" * 32}


def with_client(**policy: Any) -> dict[str, Any]:
    client = {"tokens": [{"id": "t1", "sha256": token_hash("cms-token-0123456789abcdef")}], "routes": ["docs"],
              "datasets": ["*"], "path_globs": ["**"], **policy}
    return base() | {"agent": {"ref_key_env": "KBGATE_REF_KEY", "routes": {"docs": {"index": "software-docs"}},
                               "clients": {"cms": client}}}


def test_defaults_and_the_example(tmp_path: Path) -> None:
    cfg = parse_config(base(), base_dir=tmp_path, env=ENV)
    assert cfg.documents == DocumentsConfig()
    assert (cfg.documents.max_body_bytes, cfg.documents.max_batch_documents) == (16 * 1024 * 1024, 1000)
    assert (cfg.documents.write_timeout_seconds, cfg.documents.max_document_bytes) == (30.0, 10 * 1024 * 1024)
    example = load_config(ROOT / "deploy" / "gateway.example.toml",
                          env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32})
    assert example.documents == cfg.documents  # the example states the defaults
    tuned = parse_config(base() | {"documents": {"max_body_bytes": 2048, "write_timeout_seconds": 0},
                                   "indexes": {"max_document_bytes": 4096}}, base_dir=tmp_path, env=ENV)
    assert (tuned.documents.max_body_bytes, tuned.documents.write_timeout_seconds) == (2048, 0.0)
    assert tuned.documents.max_document_bytes == 4096


@pytest.mark.parametrize(("table", "key"), [
    ({"max_body_bytes": 10}, "documents.max_body_bytes"),
    ({"max_batch_documents": 0}, "documents.max_batch_documents"),
    ({"write_timeout_seconds": -1}, "documents.write_timeout_seconds"),
    ({"body_timeout_seconds": 0}, "documents.body_timeout_seconds"),
    ({"max_bytes": 1}, "documents.max_bytes"),
])
def test_bounds_are_refused_naming_the_key(tmp_path: Path, table: dict[str, Any], key: str) -> None:
    refused(base() | {"documents": table}, key, tmp_path)


def test_the_grant_needs_write_indexes_and_write_indexes_needs_the_grant(tmp_path: Path) -> None:
    env = ENV | REF
    cfg = parse_config(with_client(tools=["documents.write"], write_indexes=["software-docs", "cms-pages"]),
                       base_dir=tmp_path, env=env)
    assert cfg.agent.clients["cms"].policy.write_indexes == ("software-docs", "cms-pages")
    plain = parse_config(with_client(tools=["knowledge.search"]), base_dir=tmp_path, env=env)
    assert plain.agent.clients["cms"].policy.write_indexes == ()
    msg = refused(with_client(tools=["documents.write"]), "agent.clients.cms.write_indexes", tmp_path, env)
    assert "required with the tool 'documents.write'" in msg
    msg = refused(with_client(tools=["search"], write_indexes=["software-docs"]), "agent.clients.cms.write_indexes",
                  tmp_path, env)
    assert "only used with the tool 'documents.write'" in msg
    refused(with_client(tools=["documents.write"], write_indexes=["../etc"]), "agent.clients.cms.write_indexes[0]",
            tmp_path, env)
    refused(with_client(tools=["documents.write"], write_indexes=[]), "agent.clients.cms.write_indexes", tmp_path, env)


def test_no_callback_path_may_shadow_the_document_api(tmp_path: Path) -> None:
    data = base()
    data["tenants"]["acme"]["path"] = "/documents/v1/indexes/x"
    refused(data, "tenants.acme.path", tmp_path)


def test_the_example_client_with_the_grant_is_valid(tmp_path: Path) -> None:
    """What an admin gets by uncommenting the example's [agent] client and adding the grant."""
    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    agent, audit = text.index("# [agent]\n"), text.index("\n[audit]\n")
    block = "\n".join(re.sub(r"^# (?=\[|[a-z0-9_]+ = )", "", line) for line in text[agent:audit].splitlines())
    block = block.replace('"<64 hex>"', '"' + "a" * 64 + '"').replace(
        'tools = ["knowledge.search", "knowledge.read"]', 'tools = ["knowledge.search", "documents.write"]\n'
        'write_indexes = ["software-docs"]')
    assert '#                                    # write_indexes = ["software-docs"]' in block  # documented
    (tmp_path / "gateway.toml").write_text(text[:agent] + block + text[audit:], "utf-8")
    cfg = load_config(tmp_path / "gateway.toml", env={"ACME_SECRET": "x" * 32, "ACME_SECRET_NEXT": "y" * 32} | REF)
    assert cfg.agent.clients["helpdesk-bot"].policy.write_indexes == ("software-docs",)
