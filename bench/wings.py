"""Every caller's wing timed the same way, printed beside the Volcengine callback.

Rationale: docs/design-notes.md, "bench/wings.py".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import orjson

from bench.stack import FIRST_LEVEL_ID, TENANT

__all__ = ["WINGS", "Wing", "served_grants"]


@dataclass(frozen=True, slots=True)
class Wing:
    """One way in. path: may hold `{route}`; auth: 'hmac' | 'bearer'; body(route, query) →
    bytes; headers: extra request headers; grants: tools the bench client must hold;
    served: False until the wing exists in the gateway; issue: what adds it."""

    name: str
    path: str
    auth: str
    body: Callable[[str, str], bytes]
    headers: tuple[tuple[str, str], ...] = ()
    grants: tuple[str, ...] = ()
    served: bool = True
    issue: str = ""
    expect: Callable[[bytes], bool] = field(default=lambda raw: True)

    def url_path(self, route: str) -> str:
        return self.path.format(route=route)


def _callback(route: str, query: str) -> bytes:
    return orjson.dumps({"FirstLevelId": FIRST_LEVEL_ID, "SecondLevelId": route, "Query": query, "Limit": 5})


def _knowledge(route: str, query: str) -> bytes:
    return orjson.dumps({"query": query, "limit": 3})


def _dify(route: str, query: str) -> bytes:
    # Dify's External Knowledge API as Dify sends it (../shared/notes/dify-external-knowledge.md;
    # gateway/dify): knowledge_id is the agent route of the bench client, [dify] prefix default.
    return orjson.dumps({"knowledge_id": route, "query": query,
                         "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}, "metadata_condition": None})


def _mcp(route: str, query: str) -> bytes:
    # A stateless tools/call (../shared/notes/mcp.md), as an MCP client sends it after initialize
    # (2025-11-25); `route` keeps it on the TiDB index like the other rows (the bench client has
    # several routes, so its `search` tool takes one).
    return orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                         "params": {"name": "search", "arguments": {"query": query, "route": route}}})


def _mcp_answered(raw: bytes) -> bool:
    result = orjson.loads(raw).get("result") or {}
    return not result.get("isError") and isinstance((result.get("structuredContent") or {}).get("results"), list)


WINGS: tuple[Wing, ...] = (
    Wing("Volcengine callback (HMAC)", f"/volcengine/{TENANT}", "hmac", _callback,
         expect=lambda raw: orjson.loads(raw).get("Ret") == 0),
    Wing("knowledge search (Bearer)", "/agent-api/v1/workspaces/{route}/knowledge/search", "bearer", _knowledge,
         grants=("knowledge.search",), expect=lambda raw: isinstance(orjson.loads(raw).get("hints"), list)),
    Wing("Dify retrieval (Bearer)", "/dify/retrieval", "bearer", _dify, grants=("dify.retrieval",),
         expect=lambda raw: bool(orjson.loads(raw).get("records"))),
    Wing("MCP tools/call search (Bearer)", "/mcp", "bearer", _mcp,
         headers=(("Accept", "application/json, text/event-stream"), ("MCP-Protocol-Version", "2025-11-25")),
         grants=("mcp.search",), expect=_mcp_answered),
)
"""The wings, callback first (the reference row)."""


def served_grants() -> list[str]:
    """Tool grants of every served wing, in order, without repeats."""
    return list(dict.fromkeys(g for w in WINGS if w.served for g in w.grants))
