"""Every error kbgate answers with, its stable code and its HTTP status.

Rationale: docs/design-notes.md, "gateway/core/errors.py".
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class RetCode:
    """One row of the Ret table: code (int, stable), HTTP status, reason key, meaning."""

    ret: int
    status: int
    reason: str
    meaning: str


# The Ret table (the 联网问答Agent callback spec "响应参数": Ret 0 = success, non-zero = failure with Msg).
# Codes are stable: never renumber, only add.
RET_TABLE: tuple[RetCode, ...] = (
    RetCode(0, 200, "success", "answered; Result holds 0..Limit items"),
    RetCode(40001, 400, "header_missing", "X-Content-Timestamp, -Nonce or -Signature absent"),
    RetCode(40002, 400, "header_repeated", "a signing header appears more than once"),
    RetCode(40003, 400, "body_not_utf8", "the body is not valid UTF-8"),
    RetCode(40004, 400, "body_not_json", "the body is not JSON"),
    RetCode(40005, 400, "body_not_object", "the JSON body is not an object"),
    RetCode(40006, 400, "field_missing", "FirstLevelId, SecondLevelId or Query absent"),
    RetCode(40007, 400, "field_type", "a field has the wrong JSON type"),
    RetCode(40008, 400, "query_empty", "Query is empty or only whitespace"),
    RetCode(40009, 400, "query_too_long", "Query exceeds the configured maximum characters"),
    RetCode(40010, 400, "limit_invalid", "Limit is not a positive integer"),
    RetCode(40011, 400, "level_id_invalid", "FirstLevelId/SecondLevelId empty or too long"),
    RetCode(40101, 401, "timestamp_invalid", "X-Content-Timestamp is not 10 ASCII digits"),
    RetCode(40102, 401, "timestamp_expired", "timestamp further than tolerance from now"),
    RetCode(40103, 401, "nonce_invalid", "X-Content-Nonce is not 6-32 ASCII letters/digits"),
    RetCode(40104, 401, "signature_invalid", "X-Content-Signature is not 64 hex characters"),
    RetCode(40105, 401, "signature_mismatch", "no live key of the tenant produced the signature"),
    RetCode(40106, 401, "no_live_key", "the tenant has no unexpired key to verify with"),
    RetCode(40401, 404, "tenant_unknown", "no tenant is configured at this path"),
    RetCode(40402, 404, "route_unknown", "no route for this FirstLevelId/SecondLevelId pair"),
    RetCode(40501, 405, "method_not_allowed", "the callback accepts POST only"),
    RetCode(40801, 408, "body_timeout", "the body did not arrive within server.body_timeout_seconds"),
    RetCode(40901, 409, "replayed", "this (timestamp, nonce) was already answered with a 200"),
    RetCode(40902, 409, "delivery_pending", "an identical delivery is being answered right now"),
    RetCode(41301, 413, "body_too_large", "the body exceeds the configured maximum bytes"),
    RetCode(41501, 415, "content_type_unsupported", "Content-Type is not application/json"),
    RetCode(41502, 415, "content_encoding_unsupported", "Content-Encoding other than identity"),
    RetCode(49901, 499, "client_disconnected", "the caller left before the answer was ready; nothing sent"),
    RetCode(50001, 500, "internal", "a bug in kbgate; never caused by input (logged)"),
    RetCode(50301, 503, "replay_store_unavailable", "Redis is unreachable or did not answer in time; fail closed"),
    RetCode(50302, 503, "index_unavailable", "the routed index cannot be opened"),
)

RET_BY_REASON: dict[str, RetCode] = {row.reason: row for row in RET_TABLE}


class KbgateError(Exception):
    """Base of every kbgate error: `code` (str), `status` (HTTP int), `message` (safe text)."""

    code: str = "internal"
    status: int = 500
    retryable: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class CallbackError(KbgateError):
    """A rejection of a Volcengine callback; `ret` and `status` come from `RET_TABLE`.

    reason: a key of `RET_BY_REASON`. message: short, safe to return as `Msg`.
    """

    def __init__(self, reason: str, message: str | None = None) -> None:
        row = RET_BY_REASON[reason]
        super().__init__(message or row.meaning)
        self.code = reason
        self.ret = row.ret
        self.status = row.status
        self.retryable = row.status >= 500


class MalformedRequest(CallbackError):
    """400: the request does not have the shape the 联网问答Agent callback spec describes."""


class VerificationFailed(CallbackError):
    """401: the timestamp or signature does not verify (the 联网问答Agent callback spec "签名校验")."""


class NotFound(CallbackError):
    """404: unknown tenant path or (FirstLevelId, SecondLevelId) pair."""


class MethodNotAllowed(CallbackError):
    """405: anything but POST on a callback path."""


class BodyTimeout(CallbackError):
    """408: the body arrived too slowly (a stalled or slow-drip client)."""


class Replayed(CallbackError):
    """409: the (tenant, timestamp, nonce) was answered with a 200 ('replayed') or another
    request is answering it right now ('delivery_pending'); see gateway.core.replay."""


class ClientDisconnected(CallbackError):
    """499 (recorded, never sent): the caller closed the connection before the answer was
    ready; the claim is released so the platform's retry is answered."""


class PayloadTooLarge(CallbackError):
    """413: body longer than `server.max_body_bytes`."""


class UnsupportedMedia(CallbackError):
    """415: Content-Type or Content-Encoding we do not accept."""


class DependencyUnavailable(CallbackError):
    """503: Redis or an index is not available; fail closed."""


# ------------------------------------------------------------------ agent endpoints

# Agent error codes (Agent知识按需搜索与读取 "按引用分页读取" for knowledge_*,
# Agent Access API 技术设计 §12 for access.*).
# code → (HTTP status, retryable, meaning). Names are the seeds' own; never rename, only add.
AGENT_CODES: dict[str, tuple[int, bool, str]] = {
    "access.unauthorized": (401, False, "no valid Bearer token"),
    "access.forbidden_tool": (403, False, "the tool is not in the client's allowed tools"),
    "access.forbidden_scope": (403, False, "route, index, path or working docs outside the policy"),
    "access.dataset_not_allowed": (403, False, "a requested dataset is outside the policy"),
    "knowledge_request_invalid": (400, False, "the request body is not as the protocol requires"),
    "knowledge_request_too_large": (413, False, "the request body is too large"),
    "knowledge_route_unknown": (404, False, "no such knowledge route"),
    "knowledge_method_not_allowed": (405, False, "method not allowed on this endpoint"),
    "knowledge_reference_invalid": (400, False, "ref or cursor tampered, malformed or another identity's"),
    "knowledge_reference_expired": (410, False, "ref or cursor older than its lifetime; search again"),
    "knowledge_scope_changed": (409, False, "the knowledge configuration changed; search again"),
    "knowledge_changed": (409, False, "the document was updated, deleted or hidden; search again"),
    "knowledge_unavailable": (503, True, "the knowledge service is unavailable"),
    "internal": (500, False, "a bug in kbgate (logged)"),
}


class AgentError(KbgateError):
    """A rejection on an agent endpoint. code: a key of the class's `codes` table (AGENT_CODES);
    message: safe text (never a document's text, a path on disk, a token or a secret).
    retryable: overrides the table's for this one (None: the table's); retry_after: seconds the
    caller should wait, or None (ToolError and DocumentError put it on the wire)."""

    codes: ClassVar[Mapping[str, tuple[int, bool, str]]] = AGENT_CODES

    def __init__(self, code: str, message: str | None = None, *, retryable: bool | None = None,
                 retry_after: float | None = None) -> None:
        status, table_retryable, meaning = self.codes[code]
        super().__init__(message or meaning)
        self.code = code
        self.status = status
        self.retryable = table_retryable if retryable is None else retryable
        self.retry_after = retry_after


class AccessDenied(AgentError):
    """401/403: the caller is not who it must be, or asks beyond its policy."""


class BadCredentials(AccessDenied):
    """401 access.unauthorized from the Bearer-token check (gateway.core.principals).

    malformed: True when the Authorization header is absent, repeated or not `Bearer <token>`
    (or an identity header is malformed), False when a well-formed token is unknown. Dify
    tells the two apart (error_code 1001 and 1002); the agent protocols do not.
    """

    def __init__(self, message: str, *, malformed: bool) -> None:
        super().__init__("access.unauthorized", message)
        self.malformed = malformed


class KnowledgeError(AgentError):
    """An error of the agent knowledge protocol (Agent知识按需搜索与读取)."""


# ------------------------------------------------------------------ Dify


@dataclass(frozen=True, slots=True)
class DifyCode:
    """One row of the Dify table: error_code (int, stable), HTTP status, reason, meaning."""

    error_code: int
    status: int
    reason: str
    meaning: str


# Dify's External Knowledge API answers errors as {"error_code": int, "error_msg": str}. 1001,
# 1002 and 2001 are Dify's documented convention (docs.dify.ai "External Knowledge API"); the
# others are kbgate's, numbered HTTP status × 10 (+ 1 for a second reason of one status).
# Why 403 for 1001 too: Dify fails an admin's registration only on 403, 404 or 502, so a
# missing key must not pass as anything else. Never renumber, only add.
DIFY_TABLE: tuple[DifyCode, ...] = (
    DifyCode(1001, 403, "authorization_malformed", "the Authorization header is absent or not 'Bearer <API key>'"),
    DifyCode(1002, 403, "authorization_failed", "the API key is unknown, or not granted dify.retrieval"),
    DifyCode(2001, 404, "knowledge_unknown", "knowledge_id names no knowledge base this key may read"),
    DifyCode(4000, 400, "request_invalid", "the body is not a Dify retrieval request (the field is named)"),
    DifyCode(4001, 400, "body_empty", "no body: Dify's check when an admin adds the API (the key is valid)"),
    DifyCode(4050, 405, "method_not_allowed", "the retrieval endpoint accepts POST only"),
    DifyCode(4080, 408, "body_timeout", "the body did not arrive within server.body_timeout_seconds"),
    DifyCode(4130, 413, "body_too_large", "the body exceeds 64 KiB"),
    DifyCode(4150, 415, "media_unsupported", "Content-Type is not application/json, or the body is encoded"),
    DifyCode(5000, 500, "internal", "a bug in kbgate (logged)"),
    DifyCode(5030, 503, "knowledge_unavailable", "the knowledge base is disabled or its index cannot be searched"),
)
DIFY_CODES: dict[str, tuple[int, bool, str]] = {
    f"dify.{row.reason}": (row.status, row.status >= 500, row.meaning) for row in DIFY_TABLE}
DIFY_ERROR_CODES: dict[str, int] = {f"dify.{row.reason}": row.error_code for row in DIFY_TABLE}


class DifyError(AgentError):
    """A rejection of Dify's retrieval endpoint. code: 'dify.<reason>' of DIFY_TABLE;
    `error_code`: its number."""

    codes = DIFY_CODES

    @property
    def error_code(self) -> int:
        return DIFY_ERROR_CODES[self.code]


class ConfigError(KbgateError):
    """An invalid configuration. `key` names the offending key, e.g. 'tenants.acme.path'; for
    the file as a whole (unreadable, not TOML) key is '<file>' and `file` its path, which the
    message names: "Config file 'kbgate.toml' is not valid TOML: ..."."""

    code = "config_invalid"

    def __init__(self, key: str, problem: str, *, file: str | os.PathLike[str] | None = None) -> None:
        super().__init__(f"Config '{key}' {problem}" if file is None else f"Config file '{os.fspath(file)}' {problem}")
        self.key = key


class TryInvalid(KbgateError):
    """An admin's try (gateway.console.try_) asked for something the config has not: `field`
    names the form field or CLI option, e.g. "tenant 'acme' has no route tech/x"."""

    code = "try_invalid"
    status = 400

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


# ================================================================ agent access tools
#
# The Agent Access tool API's own codes (Agent Access API 技术设计 §12 "错误处理"): they travel as ErrorObject
# {code, message, retryable} inside an AgentToolResult, never as a Ret. The denial codes
# of the same seed (access.unauthorized 401, access.forbidden_tool 403,
# access.forbidden_scope 403, access.dataset_not_allowed 403) are AGENT_CODES, shared with
# the knowledge protocol. Status 200 marks an *info* code: it rides along a passed result.
# access.request_too_large is kbgate's own (Agent Access API 技术设计 names no code for it): 413 as every other
# caller answers an oversized body. docs/agent-developers.md copies this table (tests keep it).
# code → (HTTP status, retryable, meaning). Never rename, only add.
ACCESS_TOOL_CODES: dict[str, tuple[int, bool, str]] = {
    "access.request_invalid": (400, False, "the tool request does not match AgentToolRequest"),
    "access.request_too_large": (413, False, "the tool request body exceeds 32 KiB"),
    "access.tool_unknown": (404, False, "no such tool"),
    "access.method_not_allowed": (405, False, "the tool API takes POST only (answered with Allow: POST)"),
    "access.page_not_found": (404, False, "no page with this id or path in the caller's scope"),
    "access.idempotency_conflict": (409, False, "this idempotencyKey was used with a different payload"),
    "access.feedback_deduped": (200, False, "an equal feedback or task exists; its count was raised"),
    "access.tool_failed": (502, True, "a downstream tool failed"),
    "answer.no_answer": (200, False, "no passage in scope answers the question"),
}


class ToolError(AgentError):
    """A failure of one agent tool call (Agent Access API 技术设计 §12). code: a key of `ACCESS_TOOL_CODES`.

    retryable: overrides the table for access.tool_failed ("depends": a 5xx or a rate
    limit is retryable, a 4xx of the tracker is not). retry_after: seconds the caller
    should wait (from a tracker's rate limit), or None. message: safe text, never a
    token, a tracker URL or unauthorized document text.
    """

    codes = ACCESS_TOOL_CODES


# ================================================================ the MCP server
#
# The MCP wing's own codes (gateway/mcp/): refusals of the HTTP request before the MCP SDK
# sees it, and a tool call's own problems. A denial (access.*) and a refused ref
# (knowledge_*) keep their AGENT_CODES. On the wire a refused request is a JSON-RPC error
# (id null) with the code in error.data.code; a tool call's problem is a tool result with
# isError true, so the model reads it and can correct itself (MCP 2025-11-25 "Tools: Error
# Handling"). code → (HTTP status, retryable, meaning). Never rename, only add.
MCP_CODES: dict[str, tuple[int, bool, str]] = {
    "mcp.method_not_allowed": (405, False, "the MCP endpoint takes POST only (GET and DELETE too are refused)"),
    "mcp.origin_forbidden": (403, False, "the request's Origin is not in mcp.allowed_origins"),
    "mcp.host_misdirected": (421, False, "the Host header is not in mcp.allowed_hosts"),
    "mcp.media_unsupported": (415, False, "Content-Type is not application/json, or Content-Encoding is not identity"),
    "mcp.body_too_large": (413, False, "the JSON-RPC body exceeds mcp.max_body_bytes"),
    "mcp.body_timeout": (408, False, "the body did not arrive within server.body_timeout_seconds"),
    "mcp.request_invalid": (400, False, "not a JSON-RPC message (-32600), or refused by the MCP SDK"),
    "mcp.batch_unsupported": (400, False, "a JSON array (a batch): MCP 2025-06-18 removed batching (-32600)"),
    "mcp.request_id_invalid": (400, False, "a JSON-RPC id that is not a string or an integer (-32600)"),
    "mcp.tool_unknown": (400, False, "no tool of this name (a JSON-RPC error, -32602)"),
    "mcp.arguments_invalid": (400, False, "a tool's arguments do not match its input schema (a tool error)"),
    "mcp.unavailable": (503, True, "no index of the client's routes could be searched (a tool error)"),
}


class McpError(AgentError):
    """A refusal by the MCP wing. code: a key of `MCP_CODES`."""

    codes = MCP_CODES


# ================================================================ the document API
#
# The document API's own codes (gateway/documents/: pipelines and CMS webhooks writing an
# index). Its denials keep their AGENT_CODES: access.unauthorized 401, access.forbidden_tool
# 403 (no 'documents.write' grant), access.forbidden_scope 403 (an index the policy's
# write_indexes does not name), access.dataset_not_allowed 403 (a document of a dataset outside
# the policy). docs/document-api.md copies this table (tests keep it).
# code → (HTTP status, retryable, meaning). Never rename, only add.
DOCUMENT_CODES: dict[str, tuple[int, bool, str]] = {
    "documents.request_invalid": (400, False, "the request is not a document, a batch or an id as the API takes"),
    "documents.request_too_large": (413, False, "the body exceeds documents.max_body_bytes"),
    "documents.body_timeout": (408, False, "the body did not arrive within documents.body_timeout_seconds"),
    "documents.media_unsupported": (415, False, "Content-Type is neither JSON nor a document type kbgate reads, "
                                                "or the body is encoded"),
    "documents.method_not_allowed": (405, False, "this endpoint does not take this method (see Allow)"),
    "documents.document_invalid": (422, False, "a document breaks a rule of kbgate index add: the request is "
                                               "refused whole, each document named"),
    "documents.document_too_large": (413, False, "a document exceeds indexes.max_document_bytes (a file, or its text)"),
    "documents.document_conflict": (409, False, "an id is held by another dataset, or was indexed from another "
                                                "source (replace=true replaces it)"),
    "documents.not_found": (404, False, "the index holds no document with this id"),
    "documents.index_not_found": (404, False, "no index has this name: a write never creates one (creating an index "
                                              "is explicit: kbgate index create NAME, or the console's Indexes page)"),
    "documents.writer_busy": (503, True, "another writer held the index for documents.write_timeout_seconds; "
                                         "nothing was written"),
    "documents.index_unavailable": (503, True, "the index cannot be opened for writing; nothing was written"),
    "documents.embedding_failed": (502, True, "a hybrid index's embedding provider failed; nothing was written"),
    "documents.endpoint_not_found": (404, False, "no endpoint of the document API has this path"),
}


class DocumentError(AgentError):
    """A refusal by the document API. code: a key of `DOCUMENT_CODES`. retryable: overrides the
    table (a provider's unusable vectors are not retryable); retry_after: seconds, or None."""

    codes = DOCUMENT_CODES
