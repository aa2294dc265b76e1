"""The MCP server's two tools, `search` and `fetch`, in the shape ChatGPT connectors and deep
research expect (../shared/notes/mcp.md "Tools a knowledge server offers"):

Rationale: docs/design-notes.md, "gateway/mcp/tools.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from gateway.core import audit, retrieve
from gateway.core.config import AgentClient, Config, McpConfig, floor_of
from gateway.core.errors import AccessDenied, AgentError, KnowledgeError, McpError
from gateway.core.events import Asker
from gateway.core.refs import RefSigner, check_holder, holder, read_by_ref
from gateway.core.runtime import Runtime
from gateway.core.scope import (
    Principal,
    ScopeRequest,
    agent_configuration,
    configuration_revision,
    resolve_agent,
    resolve_agent_routes,
)
from gateway.core.validate import Fields, Problem, clip
from indexes.publish_time import rfc3339

QUERY_MAX_CHARS = 1000
ID_MAX_CHARS = 2048
TITLE_CHARS = 200
GRANTS = {"search": "mcp.search", "fetch": "mcp.fetch"}  # tool name → the grant that offers it
CALL_KEY = "kbgate.mcp.call"  # where the transport leaves the McpCall in the ASGI scope (for the server)


@dataclass(slots=True)
class McpCall:
    """One authenticated MCP request, as the transport hands it to the tools.

    cfg: the config as the request began. event: its audit line (a tool call sets tool,
    route, scope, outcome and code). handled: a tool handler ran (else the SDK answered).
    """

    rt: Runtime
    cfg: Config
    client: AgentClient
    principal: Principal
    event: audit.AuditEvent
    handled: bool = False


class ToolFailure(Exception):
    """A tool call that could not be answered: `err` (its code and status, for the audit)
    and `text`, what the model reads in the isError result."""

    def __init__(self, err: AgentError, text: str) -> None:
        super().__init__(text)
        self.err = err
        self.text = text


# ------------------------------------------------------------------ what a model reads

SEARCH_TITLE = "Search the knowledge base"
SEARCH_DESCRIPTION = (
    "Search the company's own knowledge base (product manuals, operations guides, policies; mostly in "
    "Chinese) and get the best matching documents, best first. Use it whenever a question may be "
    "answered by internal documentation, before answering from memory. Send one question or a few "
    "keywords in the user's language; Chinese works best in Chinese, e.g. \"如何轮换密钥\", "
    "\"部署时密钥放在哪里\", \"重放攻击 防护\". Returns {\"results\": [{\"id\", \"title\", \"url\"}]}; "
    "an empty list means nothing relevant was found (try other words, e.g. a synonym). To read a "
    "document, pass its id to `fetch`. An id works only for you and only for 5 minutes."
)
FETCH_TITLE = "Read a document"
FETCH_DESCRIPTION = (
    "Read the full text of one document that `search` returned, to answer from it and cite it. Pass "
    "the `id` of a search result exactly as given (a long opaque string, e.g. fetch(id=\"eyJjbGllbnQiOi…\")); "
    "do not build ids yourself. Returns {\"id\", \"title\", \"text\", \"url\", \"metadata\"}: cite `url`. "
    "A very long document is cut (metadata.truncated is true). If the id has expired (after 5 "
    "minutes) or the document changed since the search, you get an error: call `search` again and "
    "fetch an id from the new results."
)


def tool_list(client: AgentClient, mcp: McpConfig) -> list[dict[str, Any]]:
    """The tools `client` holds a grant for, as MCP Tool objects (name, title, description,
    inputSchema, outputSchema, annotations). A client with several routes gets an optional
    `route` argument listing them."""
    routes = list(client.policy.routes)
    read_only = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
    out: list[dict[str, Any]] = []
    if GRANTS["search"] in client.policy.tools:
        props: dict[str, Any] = {"query": {
            "type": "string", "minLength": 1, "maxLength": QUERY_MAX_CHARS,
            "description": "What to look for: a question or keywords, e.g. \"如何轮换密钥\" or \"密钥 轮换 步骤\"."}}
        if len(routes) > 1:
            props["route"] = {
                "type": "string", "enum": routes,
                "description": "Search only this knowledge route (a named part of the knowledge base); "
                               "leave it out to search all of them, e.g. \"" + routes[0] + "\"."}
        out.append({
            "name": "search", "title": SEARCH_TITLE, "description": SEARCH_DESCRIPTION,
            "inputSchema": {"type": "object", "properties": props, "required": ["query"],
                            "additionalProperties": False},
            "outputSchema": _SEARCH_OUTPUT, "annotations": {"title": SEARCH_TITLE, **read_only}})
    if GRANTS["fetch"] in client.policy.tools:
        out.append({
            "name": "fetch", "title": FETCH_TITLE, "description": FETCH_DESCRIPTION,
            "inputSchema": {"type": "object", "properties": {"id": {
                "type": "string", "minLength": 1, "maxLength": ID_MAX_CHARS,
                "description": "The id of one search result, exactly as `search` returned it."}},
                "required": ["id"], "additionalProperties": False},
            "outputSchema": _FETCH_OUTPUT, "annotations": {"title": FETCH_TITLE, **read_only}})
    return out


_STR = {"type": "string"}
_SEARCH_OUTPUT = {
    "type": "object", "required": ["results"], "additionalProperties": False,
    "properties": {"results": {"type": "array", "items": {
        "type": "object", "required": ["id", "title", "url", "text"], "additionalProperties": False,
        "properties": {"id": _STR, "title": _STR, "url": {"type": "string", "minLength": 1}, "text": _STR}}}},
}
_FETCH_OUTPUT = {
    "type": "object", "required": ["id", "title", "text", "url", "metadata"], "additionalProperties": False,
    "properties": {
        "id": _STR, "title": _STR, "text": _STR, "url": {"type": "string", "minLength": 1},
        "metadata": {"type": "object", "required": ["route", "document_id", "revision", "truncated"],
                     "properties": {"route": _STR, "document_id": _STR, "path": _STR, "dataset": _STR,
                                    "revision": _STR, "publish_time": _STR, "truncated": {"type": "boolean"}}}},
}


# ------------------------------------------------------------------ the tools


def _invalid(problem: Problem) -> ToolFailure:
    return ToolFailure(McpError("mcp.arguments_invalid", problem.message),
                       f"Invalid arguments: {problem.message}. See the tool's input schema.")


def _signer(call: McpCall) -> RefSigner:
    key = call.cfg.agent.ref_key
    if key is None:  # config guarantees a key whenever a client exists
        raise ToolFailure(KnowledgeError("knowledge_unavailable"), "The knowledge base is not configured.")
    return RefSigner(key, call.rt.clock)


def document_url(url: str | None, route: str, doc_id: str) -> str:
    """The document's own URL when known, else `kbgate://{route}/{doc_id}`: stable for as long
    as the route and the document id are. Each '/'-separated segment of the id is
    percent-encoded (RFC 3986 §2.1) and a segment of dots alone has its dots encoded as '%2E',
    so no '.' or '..' segment (§5.2.4, removed by every resolver) can make
    `kbgate://evil/../../etc/passwd` out of the id `../../etc/passwd`."""
    if url:
        return url
    segments = (quote(s, safe="") for s in doc_id.split("/"))
    path = "/".join(s.replace(".", "%2E") if s and s.strip(".") == "" else s for s in segments)
    return f"kbgate://{quote(route, safe='')}/{path}"


async def search(call: McpCall, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`search`: the best documents for `query` across the client's routes (or `route`), at
    most mcp.max_results, one per document; each id a ref bound to the caller and its route.

    Raises ToolFailure: bad arguments, a denial (the policy lost the route or the grant),
    every index down (retryable)."""
    f = Fields(arguments, "", _invalid)
    f.only({"query", "route"})
    query = f.string("query", non_blank=True, max_len=QUERY_MAX_CHARS)
    named = (f.string("route"),) if "route" in f else None
    if named is not None and named[0] not in call.client.policy.routes:
        raise _invalid(Problem("route", "range", "must be one of " + ", ".join(call.client.policy.routes)))
    scopes = resolve_agent_routes(call.cfg.agent, call.client, call.principal, GRANTS["search"], ScopeRequest(),
                                  named)
    call.event.route = ",".join(r.name for r, _ in scopes)
    call.event.scope = {"routes": [e.summary() for _, e in scopes]}
    targets: list[retrieve.Target[str]] = []
    revisions: dict[str, str] = {}  # route → what its ids bind: the configuration, not the generation
    for route, eff in scopes:
        if route.enabled:
            revisions[route.name] = configuration_revision(eff, agent_configuration(route, call.client))
            targets.append(retrieve.Target(route.name, eff, floor_of(route.relevance_floor, call.cfg.search),
                                           route.dials))
    asker = Asker("mcp", call.client.id, tuple(t.key for t in targets), "search")
    merged = await retrieve.search_many(call.rt, targets, query, call.cfg.mcp.max_results,
                                        summary_chars=call.cfg.search.summary_chars, content_chars=1, asker=asker)
    failed = merged.failed
    if len(targets) == len(merged.failed):  # no route could be searched
        disabled = [r.name for r, _ in scopes if not r.enabled]
        if named is not None and disabled:
            raise ToolFailure(KnowledgeError("knowledge_scope_changed", "the route is disabled"),
                              f"The knowledge route {named[0]!r} is disabled now; search without `route`.")
        raise ToolFailure(McpError("mcp.unavailable"), "The knowledge base is unavailable right now; try again "
                                                       "in a minute.")
    signer = _signer(call) if merged.hits else None
    results = []
    for route_name, h in merged.hits:
        assert signer is not None
        ref, _ = signer.mint_for(holder(call.client, call.principal, route_name), revisions[route_name], h.doc_id,
                                 h.revision)
        results.append({"id": ref, "title": clip(h.title, TITLE_CHARS) or h.doc_id,
                        "url": document_url(h.url, route_name, h.doc_id), "text": h.summary})
    call.event.extra = {"results": len(results), "routes_failed": failed}
    call.event.outcome = "partial" if failed else "passed"
    return {"results": results}


async def fetch(call: McpCall, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`fetch`: the document a search result's id names, if the caller may still read it
    (gateway.core.refs: signature, holder, expiry, route and grant, document and scope
    revision), its text cut to mcp.fetch_max_bytes UTF-8 bytes between characters.

    Raises ToolFailure for bad arguments and for every refusal, with what to do next."""
    f = Fields(arguments, "", _invalid)
    f.only({"id"})
    ref = f.string("id", max_len=ID_MAX_CHARS)
    signer = _signer(call)
    try:
        claims = signer.open_ref(ref)
        call.event.route = claims.route
        check_holder(claims, holder(call.client, call.principal, claims.route))  # the route is the ref's own
        if signer.expired(claims.expires_at):
            raise KnowledgeError("knowledge_reference_expired")
        route, eff = resolve_agent(call.cfg.agent, call.client, call.principal, claims.route, GRANTS["fetch"])
        call.event.scope = eff.summary()
        doc, _ = read_by_ref(call.rt, route, call.client, eff, claims)
    except KnowledgeError as err:
        raise ToolFailure(err, _REFUSED.get(err.code, "This id cannot be read now; call search again.")) from None
    text, truncated = _cut(doc.text, call.cfg.mcp.fetch_max_bytes)
    metadata: dict[str, Any] = {"route": route.name, "document_id": doc.doc_id, "revision": doc.revision,
                                "truncated": truncated}
    if doc.path:
        metadata["path"] = doc.path
    if doc.dataset:
        metadata["dataset"] = doc.dataset
    published = rfc3339(doc.publish_time)  # never raises (indexes.publish_time)
    if published is not None:
        metadata["publish_time"] = published
    call.event.extra = {"text_bytes": len(text.encode("utf-8")), "truncated": truncated}
    return {"id": ref, "title": clip(doc.title, TITLE_CHARS) or doc.doc_id, "text": text,
            "url": document_url(doc.url, route.name, doc.doc_id), "metadata": metadata}


_REFUSED = {
    "knowledge_reference_invalid": "This id is not valid here: use an id exactly as `search` returned it to you "
                                   "(ids cannot be built, edited or shared between users).",
    "knowledge_reference_expired": "This id has expired (ids live 5 minutes): call `search` again and fetch an id "
                                   "from the new results.",
    "knowledge_changed": "The document was updated, removed or hidden since the search: call `search` again.",
    "knowledge_scope_changed": "The knowledge base's configuration (the route or your access) changed since the "
                               "search: call `search` again.",
    "knowledge_unavailable": "The knowledge base is unavailable right now; try again in a minute.",
}


def _cut(text: str, max_bytes: int) -> tuple[str, bool]:
    """(`text` cut to at most `max_bytes` UTF-8 bytes between characters, whether it was cut)."""
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text, False
    return raw[:max_bytes].decode("utf-8", "ignore"), True


def denial(err: AccessDenied) -> ToolFailure:
    """A policy denial as the model reads it (the policy changed since the tools were listed)."""
    return ToolFailure(err, f"Not allowed: {err.message}.")
