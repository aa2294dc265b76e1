"""Agent principals: a Bearer token → (client, Principal), per Agent知识按需搜索与读取 "协商与兼容".

Rationale: docs/design-notes.md, "gateway/core/principals.py".
"""

from __future__ import annotations

import hashlib
import hmac
import re

from starlette.datastructures import Headers

from gateway.core.config import AgentClient, AgentConfig
from gateway.core.errors import BadCredentials
from gateway.core.scope import Principal

# RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; the scheme is case-insensitive (RFC 7235
# §2.1: "bearer", "BEARER" too), the token is not.
_BEARER = re.compile(r"(?i:bearer) +([A-Za-z0-9._~+/=-]{16,512})")
_IDENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")


def token_hash(token: str) -> str:
    """SHA-256 hex of a Bearer token (what `agent.clients.ID.tokens[].sha256` holds)."""
    return hashlib.sha256(token.encode("ascii")).hexdigest()


def _one(headers: Headers, name: str) -> str | None:
    values = headers.getlist(name)
    if len(values) > 1:
        raise BadCredentials(f"header {name} appears more than once", malformed=True)
    return values[0] if values else None


def authenticate_agent(headers: Headers, agent: AgentConfig) -> tuple[AgentClient, Principal]:
    """headers: the request's; agent: the current agent config.

    Returns the client and its Principal(kind='agent_client', id=client id, key_id=token
    id, session, on_behalf_of). Raises BadCredentials ('access.unauthorized'): malformed=True
    for a missing, repeated or malformed Authorization header and for malformed identity
    headers, malformed=False for an unknown token.
    """
    auth = _one(headers, "authorization")
    m = _BEARER.fullmatch(auth) if auth is not None else None
    if m is None:
        raise BadCredentials("a Bearer token is required", malformed=True)
    digest = token_hash(m.group(1)).encode("ascii")
    found = None
    for client in agent.clients.values():
        for tk in client.tokens:
            if hmac.compare_digest(digest, tk.sha256.encode("ascii")) and found is None:
                found = (client, tk.id)
    if found is None:
        raise BadCredentials("the Bearer token is not valid", malformed=False)
    client, token_id = found
    session = _one(headers, "x-agent-session")
    behalf = _one(headers, "x-on-behalf-of")
    for name, value in (("X-Agent-Session", session), ("X-On-Behalf-Of", behalf)):
        if value is not None and not _IDENT.fullmatch(value):
            raise BadCredentials(f"header {name} is malformed", malformed=True)
    return client, Principal("agent_client", client.id, token_id, session or f"token:{token_id}", behalf)
