"""The document API: pipelines and CMS webhooks writing an index, a wing of its own.

Rationale: docs/design-notes.md, "gateway/documents/__init__.py".
"""

from __future__ import annotations

from typing import Any

from starlette.convertors import Convertor, register_url_convertor
from starlette.requests import Request
from starlette.routing import Route

from gateway.core.errors import DocumentError
from gateway.core.frame import Call, endpoint
from gateway.core.runtime import Runtime
from gateway.documents import handlers
from gateway.documents.wire import DocumentsWire
from gateway.documents.writes import Writes


class AnyConvertor(Convertor[str]):
    """A path parameter of any characters, line breaks included: Starlette's `path` is `.*`,
    which stops at a line break, so `a%0Ab` matched no route and got the server's plain-text
    404, not this API's envelope."""

    regex = "[\\s\\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("documents_any", AnyConvertor())

ROOT = "/documents/v1"
PREFIX = ROOT + "/indexes/{index}"
DOCUMENT_PATH = PREFIX + "/documents/{doc_id:documents_any}"
BATCH_PATH = PREFIX + "/batch"
EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_TOOLS = {"GET": "documents.get", "PUT": "documents.put", "DELETE": "documents.delete"}


def routes(rt: Runtime, writes: Writes | None = None) -> list[Route]:
    """The routes of the document API; every method reaches the frame, which answers the
    others 405 in the API's envelope (with Allow). writes: the worker's writes, shared with
    the console's document pages (default: its own)."""
    writes = writes or Writes(rt)
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

    async def elsewhere(call: Call) -> dict[str, Any]:
        raise DocumentError("documents.endpoint_not_found", "no endpoint of the document API has this path (see "
                                                            "docs/document-api.md: …/indexes/{index}/documents/{id}, "
                                                            "…/indexes/{index}/batch)")

    other = endpoint(rt, wire, elsewhere, tool="documents.other")
    return [Route(DOCUMENT_PATH, endpoint(rt, wire, document, tool=tool), methods=EVERY_METHOD),
            Route(BATCH_PATH, endpoint(rt, wire, batch, tool="documents.batch", method="POST"), methods=EVERY_METHOD),
            # every other path under /documents/v1: the API's envelope, never the server's plain 404
            Route(ROOT, other, methods=EVERY_METHOD),
            Route(ROOT + "/{rest:documents_any}", other, methods=EVERY_METHOD)]
