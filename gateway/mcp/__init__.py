"""The MCP server wing (issue 11): Streamable HTTP at `mcp.path` on the official SDK, the
tools `search` and `fetch` for the Bearer-token clients of `[agent]`.

    transport.py   the ASGI endpoint: Origin, method, Bearer token, bounded body, audit, metrics
    server.py      the SDK's low-level Server (tools/list, tools/call) and session manager
    tools.py       search and fetch: scope from the core, retrieval from the core, refs as ids
"""

from gateway.mcp.transport import McpWing

__all__ = ["McpWing"]
