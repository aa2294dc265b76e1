"""gateway/core/principals.py: a Bearer token → (client, Principal); a refusal tells a
malformed header (Dify's 1001) from an unknown token (1002)."""

from __future__ import annotations

from pathlib import Path

import pytest
from starlette.datastructures import Headers

from gateway.core.config import AgentConfig
from gateway.core.errors import BadCredentials
from gateway.core.principals import authenticate_agent
from tests.support.configs import TOKEN_ALICE, agent_section, config, parse


@pytest.fixture(name="agent")
def _agent(tmp_path: Path) -> AgentConfig:
    return parse(config(tmp_path, tenants=[], agent=agent_section()), tmp_path).agent


def test_known_token(agent: AgentConfig) -> None:
    client, principal = authenticate_agent(Headers({"authorization": f"Bearer {TOKEN_ALICE}"}), agent)
    assert client.id == "alice" and (principal.kind, principal.key_id, principal.session) == (
        "agent_client", "t1", "token:t1")


@pytest.mark.parametrize(("headers", "malformed"), [
    ([], True),
    ([("authorization", "Basic abc")], True),
    ([("authorization", "Bearer short")], True),
    ([("authorization", f"Bearer {TOKEN_ALICE}"), ("authorization", f"Bearer {TOKEN_ALICE}")], True),
    ([("authorization", f"Bearer {TOKEN_ALICE}"), ("x-agent-session", "bad session")], True),
    ([("authorization", "Bearer well-formed-but-unknown-0123")], False),
])
def test_refusals_say_whether_the_header_was_malformed(agent: AgentConfig, headers: list[tuple[str, str]],
                                                       malformed: bool) -> None:
    raw = [(k.encode(), v.encode()) for k, v in headers]
    with pytest.raises(BadCredentials) as exc:
        authenticate_agent(Headers(raw=raw), agent)
    assert exc.value.code == "access.unauthorized" and exc.value.status == 401
    assert exc.value.malformed is malformed
