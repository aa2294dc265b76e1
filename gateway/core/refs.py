"""Signed references and read cursors (Agent知识按需搜索与读取 "按引用分页读取": self-contained, HMAC-signed
with a domain-separated key, 5 minutes), and the re-check of a read by reference.

Rationale: docs/design-notes.md, "gateway/core/refs.py".
"""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import asdict, dataclass
from typing import Any

from itsdangerous import BadData, URLSafeSerializer

from gateway.core import retrieve
from gateway.core.config import AgentClient, AgentRoute
from gateway.core.errors import DependencyUnavailable, KnowledgeError
from gateway.core.scope import (
    EffectiveScope,
    Principal,
    agent_configuration,
    allows,
    configuration_revision,
    scope_revision,
)
from gateway.core.types import SECONDS, Clock, Secret
from indexes.types import StoredDocument

REF_TTL = 300 * SECONDS  # Agent知识按需搜索与读取: reference_ttl_seconds
REF_LABEL = b"kbgate agent-knowledge ref v1"
CURSOR_LABEL = b"kbgate agent-knowledge cursor v1"
_MAX_TOKEN_CHARS = 2048
_TOKEN = re.compile(r"[A-Za-z0-9_.-]{1,2048}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def derive_key(master: Secret, label: bytes) -> bytes:
    """HMAC-SHA256(master, label): a 32-byte key for one purpose (HKDF-expand, one block)."""
    return hmac.new(master.reveal().encode("utf-8"), label, hashlib.sha256).digest()


@dataclass(frozen=True, slots=True)
class RefClaims:
    """What a ref binds (Agent知识按需搜索与读取): identity, route, run, knowledge configuration and document.

    session, on_behalf_of: from the Principal. scope_revision: SHA-256 hex of the knowledge
    configuration (`scope.configuration_revision`; the generation-inclusive
    `scope.scope_revision` in refs of the older format). revision: the document's, SHA-256
    hex. expires_at: unix seconds (int).
    """

    client: str
    session: str | None
    on_behalf_of: str | None
    route: str
    run_id: str | None
    scope_revision: str
    doc_id: str
    revision: str
    expires_at: int


@dataclass(frozen=True, slots=True)
class Holder:
    """Who may use a ref: the client, its session and end user (from the Principal), the
    route it was minted on and the run (None outside a run)."""

    client: str
    session: str | None
    on_behalf_of: str | None
    route: str
    run_id: str | None = None


def holder(client: AgentClient, principal: Principal, route: str, run_id: str | None = None) -> Holder:
    """The Holder of a call: `client` as authenticated, `principal`'s session and end user."""
    return Holder(client.id, principal.session, principal.on_behalf_of, route, run_id)


def check_holder(claims: RefClaims, who: Holder) -> None:
    """Raise KnowledgeError('knowledge_reference_invalid') unless `claims` were minted for `who`
    (another client, session, end user, route or run may not use a ref: Agent知识按需搜索与读取)."""
    if (claims.client, claims.session, claims.on_behalf_of, claims.route, claims.run_id) != (
            who.client, who.session, who.on_behalf_of, who.route, who.run_id):
        raise KnowledgeError("knowledge_reference_invalid", "the reference belongs to another identity, route or run")


@dataclass(frozen=True, slots=True)
class CursorClaims:
    """The next page of one ref: offset (characters into the content), consumed (content
    bytes already delivered in this chain), ref_digest (SHA-256 hex of the ref string)."""

    ref_digest: str
    offset: int
    consumed: int
    expires_at: int


def ref_digest(ref: str) -> str:
    return hashlib.sha256(ref.encode("ascii")).hexdigest()


class RefSigner:
    """Mints and opens refs and cursors. master: the agent ref key; clock: the app clock."""

    def __init__(self, master: Secret, clock: Clock, ttl: int = REF_TTL) -> None:
        kw: dict[str, Any] = {"signer_kwargs": {"key_derivation": "hmac", "digest_method": hashlib.sha256}}
        self._refs = URLSafeSerializer(derive_key(master, REF_LABEL), salt=REF_LABEL, **kw)
        self._cursors = URLSafeSerializer(derive_key(master, CURSOR_LABEL), salt=CURSOR_LABEL, **kw)
        self.clock = clock
        self.ttl = ttl

    def expiry(self) -> int:
        """Unix seconds at which a token minted now expires."""
        return int(self.clock.now()) + self.ttl

    def expired(self, expires_at: int) -> bool:
        return self.clock.now() > expires_at

    def mint_ref(self, claims: RefClaims) -> str:
        return str(self._refs.dumps(asdict(claims)))

    def mint_for(self, who: Holder, scope_revision: str, doc_id: str, revision: str) -> tuple[str, int]:
        """(a ref to document `doc_id` at `revision`, bound to `who` and `scope_revision` (the
        configuration revision, `scope.configuration_revision`); its expiry in unix seconds)."""
        expires = self.expiry()
        claims = RefClaims(client=who.client, session=who.session, on_behalf_of=who.on_behalf_of, route=who.route,
                           run_id=who.run_id, scope_revision=scope_revision, doc_id=doc_id, revision=revision,
                           expires_at=expires)
        return self.mint_ref(claims), expires

    def open_ref(self, token: object) -> RefClaims:
        """Verify a ref's signature and shape. Raises KnowledgeError('knowledge_reference_invalid')."""
        data = _load(self._refs, token)
        try:
            claims = RefClaims(**data)
        except TypeError:
            raise _invalid() from None
        ok = (
            all(isinstance(getattr(claims, f), str) for f in ("client", "route", "doc_id"))
            and all(isinstance(getattr(claims, f), str | None) for f in ("session", "on_behalf_of", "run_id"))
            and isinstance(claims.scope_revision, str) and _HEX64.fullmatch(claims.scope_revision)
            and isinstance(claims.revision, str)
            and isinstance(claims.expires_at, int) and not isinstance(claims.expires_at, bool)
        )
        if not ok:
            raise _invalid()
        return claims

    def mint_cursor(self, ref: str, offset: int, consumed: int) -> str:
        return str(self._cursors.dumps(asdict(CursorClaims(ref_digest(ref), offset, consumed, self.expiry()))))

    def open_cursor(self, token: object, ref: str) -> CursorClaims:
        """Verify a cursor and that it continues `ref`. Raises knowledge_reference_invalid."""
        data = _load(self._cursors, token)
        try:
            c = CursorClaims(**data)
        except TypeError:
            raise _invalid() from None
        ints = all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                   for v in (c.offset, c.consumed, c.expires_at))
        if not ints or not isinstance(c.ref_digest, str) or not hmac.compare_digest(
                c.ref_digest.encode(), ref_digest(ref).encode()):
            raise _invalid()
        return c


def _invalid() -> KnowledgeError:
    return KnowledgeError("knowledge_reference_invalid", "the reference or cursor is not valid")


def _load(serializer: URLSafeSerializer, token: object) -> dict[str, Any]:
    if not isinstance(token, str) or len(token) > _MAX_TOKEN_CHARS or not _TOKEN.fullmatch(token):
        raise _invalid()
    try:
        data = serializer.loads(token)
    except (BadData, ValueError, UnicodeDecodeError):
        raise _invalid() from None
    if not isinstance(data, dict):
        raise _invalid()
    return data


def read_by_ref(indexes: retrieve.Indexes, route: AgentRoute, client: AgentClient, eff: EffectiveScope,
                claims: RefClaims) -> tuple[StoredDocument, str]:
    """The document a ref names, only if nothing it was minted under has changed.

    route, eff: the ref's route and the caller's effective scope on it, resolved now
    (gateway.core.scope.resolve_agent: a client that lost the route or the tool is denied
    before this). Returns (the stored document, the current knowledge_scope_revision, which
    covers the index generation). Checks, in order (Agent知识按需搜索与读取 "按引用分页读取"): the route is
    enabled, else 409 'knowledge_scope_changed'; the index opens, else 503
    'knowledge_unavailable'; the document exists, is visible and has the ref's revision, else
    409 'knowledge_changed'; the knowledge configuration is the ref's (`bound`), else 409
    'knowledge_scope_changed'; the document still lies inside `eff` by every name (it moved:
    its path or dataset changed), else 409 'knowledge_changed'. Raises KnowledgeError.
    """
    if not route.enabled:
        raise KnowledgeError("knowledge_scope_changed", "the route is disabled")
    try:
        doc, generation = retrieve.read(indexes, eff, claims.doc_id)
    except DependencyUnavailable:
        raise KnowledgeError("knowledge_unavailable") from None
    if doc is None or not doc.qa_visible or doc.revision != claims.revision:
        raise KnowledgeError("knowledge_changed")
    configured = agent_configuration(route, client)
    current = scope_revision(eff, configured, generation)
    if not bound(claims, eff, configured, current):
        raise KnowledgeError("knowledge_scope_changed")
    if not allows(eff, doc.path, doc.dataset, doc.qa_visible, names=(doc.doc_id,)):
        raise KnowledgeError("knowledge_changed")
    return doc, current


def bound(claims: RefClaims, eff: EffectiveScope, configured: dict[str, object], current: str) -> bool:
    """Was the ref minted under the knowledge configuration in force now? Its scope_revision is
    the configuration revision, or — a ref of the older format — the generation-inclusive
    scope revision `current` (module doc: such a ref verifies until the index commits)."""
    return claims.scope_revision in (configuration_revision(eff, configured), current)
