"""The MCP tests' setting: the agent clients with MCP grants, and the official SDK's own client
(`mcp.Client` over `mcp.client.streamable_http.streamable_http_client`) connected to a URL —
a real `kbgate serve` — or, for in-process tests, to the app through httpx2's ASGI transport.

Rationale: docs/design-notes.md, "tests/support/mcp_env.py".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import orjson
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from tests.support.configs import EVERYTHING, REF_KEY, TOKEN_ALICE, TOKEN_BOB, TOKEN_CAROL, client

TOKEN_DAVE = "dave-token-DDDDDDDDDDDDDDDDDDDDD"
MCP_GRANTS = ("mcp.search", "mcp.fetch")
# The two protocol revisions: (client mode, the version it must end up speaking).
REVISIONS = (("legacy", "2025-11-25"), ("auto", "2026-07-28"))
TOP = "guide/key-rotation.md"  # the best hit for 密钥轮换 (tests.support.documents)

__all__ = ["MCP_GRANTS", "REF_KEY", "REVISIONS", "TOKEN_ALICE", "TOKEN_BOB", "TOKEN_CAROL", "TOKEN_DAVE", "TOP",
           "connect", "mcp_agent_section", "payload"]


def mcp_agent_section(**over: Any) -> dict[str, Any]:
    """An [agent] table for the MCP tests (every route's index exists, so /readyz is 200)."""
    section: dict[str, Any] = {
        "ref_key_env": "KBGATE_REF_KEY",
        "routes": {"support": {"index": "docs"}, "ops": {"index": "docs", "path_globs": ["ops/**"]},
                   "off": {"index": "docs", "enabled": False}},
        "clients": {
            "alice": client("t1", TOKEN_ALICE, ["support", "ops", "off"], MCP_GRANTS, **EVERYTHING),
            "bob": client("t1", TOKEN_BOB, ["support"], MCP_GRANTS, **EVERYTHING),
            "carol": client("c1", TOKEN_CAROL, ["support"], ["mcp.search"], datasets=["public"],
                            path_globs=["guide/**"]),
            "dave": client("d1", TOKEN_DAVE, ["support"], ["knowledge.search", "knowledge.read"], **EVERYTHING),
        },
    }
    section.update(over)
    return section


@asynccontextmanager
async def connect(url: str, token: str | None, *, mode: str = "legacy", headers: Mapping[str, str] | None = None,
                  transport: httpx2.AsyncBaseTransport | None = None) -> AsyncIterator[Client]:
    """The SDK's Client on `url` with `Authorization: Bearer token` (none when token is None)
    and `headers`; `transport`: httpx2's ASGI transport for an in-process app."""
    sent = {**({"authorization": f"Bearer {token}"} if token is not None else {}), **(headers or {})}
    kw: dict[str, Any] = {"headers": sent, "timeout": 30.0}
    if transport is not None:
        kw["transport"] = transport
    async with httpx2.AsyncClient(**kw) as http, Client(
            streamable_http_client(url, http_client=http), mode=mode) as c:
        yield c


def payload(result: CallToolResult) -> dict[str, Any]:
    """The JSON of a successful tool result: its one text item, which must equal structuredContent."""
    assert not result.is_error, result.content
    assert len(result.content) == 1 and isinstance(result.content[0], TextContent)
    data: dict[str, Any] = orjson.loads(result.content[0].text)
    assert data == result.structured_content
    return data
