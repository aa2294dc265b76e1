"""The MCP server wing: Streamable HTTP at `mcp.path` on the official SDK, the
tools `search` and `fetch` for the Bearer-token clients of `[agent]`.

Rationale: docs/design-notes.md, "gateway/mcp/__init__.py".
"""

from gateway.mcp.transport import McpWing

__all__ = ["McpWing"]
