"""Dify's External Knowledge API: a thin wing on the core.

Rationale: docs/design-notes.md, "gateway/dify/__init__.py".
"""

from __future__ import annotations

from starlette.routing import Route

from gateway.core.frame import endpoint
from gateway.core.runtime import Runtime
from gateway.dify.retrieval import GRANT, retrieval
from gateway.dify.wire import DifyWire

EVERY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


def routes(rt: Runtime) -> list[Route]:
    """The Starlette route of `POST {dify.prefix}/retrieval` (the prefix as configured at start:
    changing it needs a restart). Every method reaches the frame, which answers the others
    405 in Dify's envelope."""
    return [Route(rt.config.dify.path, endpoint(rt, DifyWire(), retrieval, tool=GRANT, method="POST"),
                  methods=EVERY_METHOD)]
