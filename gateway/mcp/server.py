"""The MCP server on the official SDK (`mcp` 2.x): one low-level `Server` with two request
handlers, `tools/list` and `tools/call`, served by the SDK's Streamable HTTP session
manager in stateless JSON mode.

Rationale: docs/design-notes.md, "gateway/mcp/server.py".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import mcp_types as types
import orjson
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from gateway.core.config import McpConfig
from gateway.core.errors import AccessDenied, AgentError, McpError
from gateway.mcp.tools import CALL_KEY, GRANTS, McpCall, ToolFailure, denial, fetch, search, tool_list

log = logging.getLogger("kbgate.mcp")

INSTRUCTIONS = (
    "kbgate answers from a company's own knowledge base (mostly Chinese documents). Call `search` with the "
    "user's question, then `fetch` the ids of the results you need and answer from their text, citing each "
    "document's url."
)
_TOOLS = {"search": search, "fetch": fetch}
INTERNAL_TEXT = "kbgate failed to answer this call (a bug, logged on the server); try again later or tell its operator."


def call_of(ctx: ServerRequestContext[Any, Any]) -> McpCall:
    """The McpCall the transport attached to this request. Raises RuntimeError when the
    request did not come through the transport (a bug: every route to the SDK does)."""
    request = ctx.request
    found = getattr(request, "scope", {}).get(CALL_KEY)
    if not isinstance(found, McpCall):
        raise RuntimeError("an MCP request without an authenticated caller")
    return found


async def list_tools(ctx: ServerRequestContext[Any, Any],
                     params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    """`tools/list`: the tools the caller's grants offer (all on one page)."""
    call = call_of(ctx)
    tools = [types.Tool.model_validate(t) for t in tool_list(call.client, call.cfg.mcp)]
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams) -> types.CallToolResult:
    """`tools/call`: run `search` or `fetch` for the caller and answer its JSON as one text
    item mirrored in structuredContent; a ToolFailure is a result with isError true, and so
    is any other exception (a bug: code 'internal', outcome failed, the trace logged, no detail
    sent). A tool the caller has no grant for raises the SDK's error for an unknown tool."""
    call = call_of(ctx)
    call.handled = True
    name = params.name
    grant = GRANTS.get(name)
    call.event.tool = grant or "mcp.unknown"
    if grant is None or grant not in call.client.policy.tools:
        err: AgentError = (AccessDenied("access.forbidden_tool", "the tool is not granted to this client")
                           if grant is not None else McpError("mcp.tool_unknown"))
        _record(call, err)
        raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {name[:64]}")
    return await tool_result(call, name, params.arguments or {})


async def tool_result(call: McpCall, name: str, arguments: Mapping[str, Any]) -> types.CallToolResult:
    """The result of the granted tool `name` (a key of the tools: search, fetch): its JSON as
    one text item mirrored in structuredContent, or an isError result (`call_tool`). Every
    tool call and an admin's try (gateway.console.try_) answer through here."""
    try:
        data = await _TOOLS[name](call, arguments)
    except AccessDenied as exc:
        failure = denial(exc)
    except ToolFailure as exc:
        failure = exc
    except Exception:  # a bug: the SDK would send its text as a JSON-RPC error; the trace stays in the log
        log.exception("mcp tool failed", extra={"request_id": call.event.request_id, "tool": call.event.tool})
        failure = ToolFailure(AgentError("internal", "internal error"), INTERNAL_TEXT)
    else:
        text = orjson.dumps(data).decode("utf-8")
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=data)
    _record(call, failure.err)
    return types.CallToolResult(content=[types.TextContent(text=failure.text)], is_error=True)


def _record(call: McpCall, err: AgentError) -> None:
    """What the audit line says of a refused tool call (answered with HTTP 200): denied for a
    401/403 code, else failed; the code."""
    call.event.outcome = "denied" if err.status in (401, 403) else "failed"
    call.event.code = err.code


def _no_param_headers(name: str) -> None:
    """No tool declares `Mcp-Param-*` headers (x-mcp-header), so 2026-07-28 calls have none to
    check: without this the SDK would run tools/list before every call to find out."""
    return None


def build_server(version: str) -> Server[Any]:
    """The SDK's low-level Server for kbgate: tools/list and tools/call (ping, initialize and
    server/discover are the SDK's own). OpenTelemetry's per-request span is left out: kbgate
    exports none. version: kbgate's, in serverInfo."""
    server: Server[Any] = Server("kbgate", version=version, title="kbgate knowledge", instructions=INSTRUCTIONS,
                                 on_list_tools=list_tools, on_call_tool=call_tool,
                                 get_tool_input_schema=_no_param_headers)
    server.middleware = []
    return server


# The SDK's DNS-rebinding protection stays off: the transport checks Origin (403) and Host (421)
# itself before the SDK sees a request (gateway.mcp.transport.host_allowed: host names in any
# case, default ports, IPv6 literals, where the SDK compares strings) and answers in the wing's
# JSON-RPC envelope (the SDK's 421 is plain text).
NO_SDK_HOST_CHECK = TransportSecuritySettings(enable_dns_rebinding_protection=False)


def session_manager(server: Server[Any], mcp: McpConfig) -> StreamableHTTPSessionManager:
    """Stateless, JSON responses, the configured body cap, the SDK's Host/Origin check off
    (`NO_SDK_HOST_CHECK`). Its `run()` must be entered before it serves: in a task of the
    application's lifespan, by the first request that needs it (gateway.mcp.transport.McpWing)."""
    return StreamableHTTPSessionManager(server, json_response=True, stateless=True,
                                        security_settings=NO_SDK_HOST_CHECK, max_request_body_size=mcp.max_body_bytes)
