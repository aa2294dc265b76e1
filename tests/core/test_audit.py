"""gateway/core/audit.py: one JSON line per agent call — passed, denied, failed, partial."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from gateway.core import audit
from gateway.core.config import AuditConfig, parse_config
from gateway.core.errors import ConfigError
from gateway.core.events import Events
from gateway.core.scope import Principal
from tests.support.agent_env import (
    REF_KEY,
    SECRET_TEXT,
    TOKEN_ALICE,
    TOKEN_BOB,
    TOKEN_CAROL,
    EnvFactory,
    ok,
)

FIELDS = {"ts", "event", "wing", "request_id", "principal", "route", "tool", "scope", "outcome", "status", "code",
          "duration_ms", "run_id"}


@pytest.mark.anyio
async def test_every_call_is_one_line_with_outcome(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref()                                  # passed (search)
    ok(await e.read(ref), "bailing.agent-knowledge-read.v1")      # passed (read)
    await e.search(route="ops", token=TOKEN_BOB)                  # denied 403
    await e.search(token="nobody-XXXXXXXXXXXXXXXXXXXX")           # denied 401
    await e.read("garbage")                                       # failed 400
    await e.search(route="gone")                                  # answered, status unavailable
    lines = e.audit_lines()
    assert [(x["tool"], x["outcome"], x["status"], x["code"]) for x in lines] == [
        ("knowledge.search", "passed", 200, None),
        ("knowledge.read", "passed", 200, None),
        ("knowledge.search", "denied", 403, "access.forbidden_scope"),
        ("knowledge.search", "denied", 401, "access.unauthorized"),
        ("knowledge.read", "failed", 400, "knowledge_reference_invalid"),
        ("knowledge.search", "failed", 200, None),
    ]
    for x in lines:
        assert FIELDS <= set(x), x
        assert x["event"] == "agent_call" and x["wing"] == "agent" and x["duration_ms"] >= 0
    first = lines[0]
    assert first["principal"] == {"kind": "agent_client", "id": "alice", "key_id": "t1", "session": "token:t1",
                                  "on_behalf_of": None}
    assert first["route"] == "support"
    assert first["scope"]["index"] == "docs" and first["scope"]["include_working_docs"] is False
    assert lines[3]["principal"] is None and lines[3]["scope"] is None
    assert lines[2]["principal"]["id"] == "bob" and lines[2]["scope"] is None  # denied before a scope


@pytest.mark.anyio
async def test_audit_never_holds_tokens_keys_queries_or_text(env: EnvFactory) -> None:
    e = await env()
    ref, _ = await e.first_ref("密钥轮换")
    ok(await e.read(ref), "bailing.agent-knowledge-read.v1")
    await e.search(SECRET_TEXT, token=TOKEN_CAROL)
    raw = (e.root / "audit.jsonl").read_text("utf-8")
    # the three calls were audited (an empty file would hold no leak either)
    assert [(x["tool"], x["outcome"], x["principal"]["id"]) for x in e.audit_lines()] == [
        ("knowledge.search", "passed", "alice"), ("knowledge.read", "passed", "alice"),
        ("knowledge.search", "passed", "carol")]
    for leak in (TOKEN_ALICE, TOKEN_BOB, TOKEN_CAROL, REF_KEY, SECRET_TEXT, "密钥轮换", ref, "新旧两把密钥"):
        assert leak not in raw, leak


def test_partial_outcome_is_kept() -> None:
    ev = audit.AuditEvent(ts=1.0, request_id="r", tool="knowledge.search", route="x", outcome="partial")
    line = orjson.loads(ev.to_json())
    assert line["outcome"] == "partial"


@pytest.mark.parametrize(("status", "outcome"), [(200, "passed"), (401, "denied"), (403, "denied"),
                                                  (400, "failed"), (409, "failed"), (503, "failed")])
def test_outcome_of_status(status: int, outcome: str) -> None:
    assert audit.outcome_of(status) == outcome


def _event() -> audit.AuditEvent:
    return audit.AuditEvent(ts=1_800_000_000.0, request_id="abc", tool="knowledge.read", route="support",
                            principal=Principal("agent_client", "alice", "t1", "s", None), status=410,
                            outcome="failed", code="knowledge_reference_expired")


def test_file_sink_appends_one_line_per_event(tmp_path: Path) -> None:
    cfg = AuditConfig("file", tmp_path / "a.jsonl")
    audit.write(cfg, _event())
    audit.write(cfg, _event())
    lines = (tmp_path / "a.jsonl").read_bytes().splitlines()
    assert len(lines) == 2 and orjson.loads(lines[1])["code"] == "knowledge_reference_expired"


def test_stdout_sink(capsys: pytest.CaptureFixture[str]) -> None:
    audit.write(AuditConfig("stdout"), _event())
    out = capsys.readouterr().out
    assert orjson.loads(out)["request_id"] == "abc" and out.endswith("\n")


def test_off_sink_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit.write(AuditConfig("off"), _event())
    assert capsys.readouterr().out == ""


def test_record_writes_the_line_and_publishes_the_event(tmp_path: Path) -> None:
    events = Events()
    seen: list[audit.AuditEvent] = []
    events.subscribe(audit.AuditEvent, seen.append)
    ev = _event()
    ev.wing = "mcp"
    audit.record(AuditConfig("file", tmp_path / "a.jsonl"), events, ev)
    assert seen == [ev]
    assert orjson.loads((tmp_path / "a.jsonl").read_bytes())["wing"] == "mcp"


def test_failing_file_sink_does_not_raise(tmp_path: Path) -> None:
    audit.write(AuditConfig("file", tmp_path / "missing-dir" / "a.jsonl"), _event())  # logged, not raised
    assert not (tmp_path / "missing-dir").exists()


@pytest.mark.parametrize(("section", "key"), [({"sink": "syslog"}, "audit.sink"), ({"sink": "file"}, "audit.path"),
                                              ({"sink": "stdout", "path": "x"}, "audit.path")])
def test_audit_config_errors_name_the_key(tmp_path: Path, section: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"audit": section}, base_dir=tmp_path, env={})
    assert err.value.key == key
