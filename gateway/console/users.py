"""Console users and the one authorisation rule every console page asks: `can(user, action, index)`.

Rationale: docs/design-notes.md, "gateway/console/users.py".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal["viewer", "owner", "admin"]
ROLES: tuple[Role, ...] = ("viewer", "owner", "admin")

# What a page asks before it shows or changes something. Reads with an index are scoped for owners.
READ = frozenset({"view"})  # overview, deliveries, try, documents served: every role
INDEX_READ = frozenset({"view_gaps"})  # an owner: only their indexes
INDEX_WRITE = frozenset({"file_gap", "edit_documents", "edit_synonyms"})  # owner of the index, admin
ADMIN_ONLY = frozenset({"manage_users", "manage_tenants", "manage_indexes"})
ACTIONS = READ | INDEX_READ | INDEX_WRITE | ADMIN_ONLY


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """Who is using the console. name: the login name ('admin' for the admin token).
    role: viewer | owner | admin. indexes: the index names an owner owns (empty otherwise)."""

    name: str
    role: Role
    indexes: frozenset[str] = field(default_factory=frozenset)

    @property
    def role_name(self) -> str:
        """'admin', 'viewer' or 'owner of a, b', in English (for a tool's JSON error)."""
        return f"owner of {', '.join(sorted(self.indexes))}" if self.role == "owner" else self.role

    @property
    def role_label(self) -> str:
        """role_name in the request's language (for the page header)."""
        from gateway.console.i18n import _

        return _("owner of %(indexes)s", indexes=", ".join(sorted(self.indexes))) if self.role == "owner" \
            else _(self.role)


def can(user: ConsoleUser | None, action: str, index: str | None = None) -> bool:
    """True when `user` may do `action` (one of ACTIONS) on `index` (None: not about one index,
    or "any of them" for an index-scoped read, which the page then filters per index).
    Raises ValueError for an unknown action, so a typo never grants anything."""
    if action not in ACTIONS:
        raise ValueError(f"unknown console action {action!r}")
    if user is None:
        return False
    if user.role == "admin":
        return True
    if action in READ:
        return True
    if action in INDEX_READ:
        return user.role == "viewer" or index is None or index in user.indexes
    if action in INDEX_WRITE:
        return user.role == "owner" and index is not None and index in user.indexes
    return False


def visible_indexes(user: ConsoleUser, names: list[str]) -> list[str]:
    """The subset of index `names` whose gaps `user` may see, in the given order."""
    return [n for n in names if can(user, "view_gaps", n)]
