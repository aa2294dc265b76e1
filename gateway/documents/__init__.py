"""The document API (issue 20): pipelines and CMS webhooks writing an index, a wing of its own.

    PUT    /documents/v1/indexes/{index}/documents/{id}    a document (JSON, or a file of a type kbgate reads)
    DELETE /documents/v1/indexes/{index}/documents/{id}
    GET    /documents/v1/indexes/{index}/documents/{id}    its revision, commit, when applied
    POST   /documents/v1/indexes/{index}/batch             upserts and deletes in one commit, or none

Why a wing and not a tool of the Agent Access API: that API never writes content (seed 002
§3, §15: agents file feedback and tasks, content changes go through review), and its callers
are agents; these callers are pipelines and CMSs writing what is already published. They share
the agent clients' Bearer tokens and policies (gateway.core.principals, the grant
'documents.write' and the policy's `write_indexes`), the frame, the audit line (wing
'documents') and its metrics, as Dify and MCP do.

    wire.py       the frame's Wire: the tool API's envelope, DOCUMENT_CODES, Retry-After, Allow
    reading.py    JSON documents and uploaded files → Documents, by the readers of `index add`
    writes.py     one write at a time per index in a worker, through the index's one writer
    handlers.py   grant → index → body → documents → one commit → what changed
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.routing import Route

from gateway.core.errors import DocumentError
from gateway.core.frame import Call, endpoint
from gateway.core.runtime import Runtime
from gateway.documents import handlers
from gateway.documents.wire import DocumentsWire
from gateway.documents.writes import Writes

PREFIX = "/documents/v1/indexes/{index}"
DOCUMENT_PATH = PREFIX + "/documents/{doc_id:path}"
BATCH_PATH = PREFIX + "/batch"
EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_TOOLS = {"GET": "documents.get", "PUT": "documents.put", "DELETE": "documents.delete"}


def routes(rt: Runtime) -> list[Route]:
    """The routes of the document API; every method reaches the frame, which answers the
    others 405 in the API's envelope (with Allow)."""
    writes = Writes(rt)
    wire = DocumentsWire(rt)

    async def document(call: Call) -> dict[str, Any]:
        method = call.request.method
        if method == "PUT":
            return await handlers.put(call, writes)
        if method == "DELETE":
            return await handlers.delete(call, writes)
        if method == "GET":
            return await handlers.get(call, writes)
        raise DocumentError("documents.method_not_allowed", "use GET, PUT or DELETE")

    async def batch(call: Call) -> dict[str, Any]:
        return await handlers.batch(call, writes)

    def tool(request: Request) -> str:
        return _TOOLS.get(request.method, "documents.other")

    return [Route(DOCUMENT_PATH, endpoint(rt, wire, document, tool=tool), methods=EVERY_METHOD),
            Route(BATCH_PATH, endpoint(rt, wire, batch, tool="documents.batch", method="POST"), methods=EVERY_METHOD)]
