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


@pytest.mark.parametrize("value", [f"bearer {TOKEN_ALICE}", f"BEARER {TOKEN_ALICE}", f"bEaReR {TOKEN_ALICE}",
                                   f"Bearer   {TOKEN_ALICE}"])
def test_the_scheme_is_case_insensitive_and_takes_one_or_more_spaces(agent: AgentConfig, value: str) -> None:
    # RFC 7235 §2.1: auth-scheme is case-insensitive; RFC 6750 §2.1: "Bearer" 1*SP b64token.
    client, _ = authenticate_agent(Headers({"authorization": value}), agent)
    assert client.id == "alice"


@pytest.mark.parametrize(("headers", "malformed"), [
    ([("authorization", f"Bearer\t{TOKEN_ALICE}")], True),
    ([("authorization", f"Bearer{TOKEN_ALICE}")], True),
    ([("authorization", f" Bearer {TOKEN_ALICE}")], True),
    ([("authorization", f"Bearers {TOKEN_ALICE}")], True),
    ([("authorization", f"bearer {TOKEN_ALICE.upper()}")], False),  # the token itself is case-sensitive
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
