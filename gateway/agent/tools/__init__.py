"""The Agent Access tool API (Agent Access API 技术设计): `POST /agent-access/v1/tools/{tool}`.

Rationale: docs/design-notes.md, "gateway/agent/tools/__init__.py".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from gateway.agent.tools.clients import LazyClients
from gateway.agent.tools.read import tool_ask, tool_get_context, tool_get_page, tool_search
from gateway.agent.tools.request import ToolCall, ToolsWire, read_request
from gateway.agent.tools.write import tool_create_feedback, tool_create_improvement_task
from gateway.core.errors import ToolError
from gateway.core.frame import Call, endpoint
from gateway.core.runtime import Runtime

PATH = "/agent-access/v1/tools/{tool}"
Tool = Callable[[ToolCall], Awaitable[dict[str, Any]]]
TOOLS: dict[str, Tool] = {
    "search": tool_search,
    "ask": tool_ask,
    "get_page": tool_get_page,
    "get_context": tool_get_context,
    "create_feedback": tool_create_feedback,
    "create_improvement_task": tool_create_improvement_task,
}


def routes(rt: Runtime) -> list[Route]:
    """The Starlette route of the tool API; its per-worker clients close with `rt`."""
    clients = LazyClients(rt)
    rt.on_close(clients.close)

    async def dispatch(call: Call) -> dict[str, Any]:
        return await run_tool(call, call.request.path_params["tool"], clients)

    def tool_name(request: Request) -> str:
        return f"access.{request.path_params['tool'][:40]}"

    # Every method reaches the frame, which answers the others 405 in the tool envelope with
    # Allow: POST (Starlette's own 405 would be plain text).
    every = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    return [Route(PATH, endpoint(rt, ToolsWire(), dispatch, tool=tool_name, method="POST"), methods=every)]


async def run_tool(call: Call, name: str, clients: LazyClients) -> dict[str, Any]:
    """The tool `name` for `call` (its body read from the call's request): what every tool
    call and an admin's try (gateway.console.try_) run. Raises ToolError and the tools' errors."""
    tool = TOOLS.get(name)
    if tool is None:
        raise ToolError("access.tool_unknown", "no such tool")
    body = await read_request(call, name)
    if "requestId" in body:
        call.event.extra["caller_request_id"] = body["requestId"]  # ours stays the audit key
    call.event.extra["caller_type"] = body["caller"]["type"]
    if body.get("scope", {}).get("includeWorkingDocs"):
        call.event.extra["include_working_docs"] = True
    return await tool(ToolCall(call, name, body["input"], clients))
