"""Dify's External Knowledge API (issue 11): a thin wing on the core.

Dify POSTs `{endpoint}/retrieval` with `Authorization: Bearer <API key>`; the admin pastes
`https://HOST{dify.prefix}` (default `/dify`) as the endpoint. The key is an agent client's
token whose policy grants `dify.retrieval`; `knowledge_id` names one of the client's agent
routes. Everything else is the core's: principals, the scope engine, the scoped retrieval,
the audit line (wing 'dify') and the per-wing metrics that observe it.

    wire.py        the frame's Wire: 64 KiB bodies, DIFY_TABLE codes, {error_code, error_msg}
    request.py     Dify's request as Dify sends it → Retrieval (metadata_condition → MetaFilter)
    retrieval.py   the handler: grant → body → scope → search → records
    records.py     hits → records; the score normalization
    schemas/       JSON Schemas of the request, the answer and the error
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
