"""Settings of the knowledge owner's loop: `[gaps]` (gateway/console/gaps), parsed by
`gateway.core.config.gaps`; the console's users, `[admin.users.NAME]`, parsed by
`gateway.core.config.admin`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.core.types import SECONDS, Secret

__all__ = ["CONSOLE_ROLES", "DEFAULT_GAP_THRESHOLD", "ConsoleUserConfig", "GapsConfig"]

DEFAULT_GAP_THRESHOLD = 0.3
"""A question whose best hit's relevance (0..1, `indexes.types.Hit.relevance`) is under this is
a knowledge gap ("low score"); one with no hit at all always is ("no answer")."""


@dataclass(frozen=True, slots=True)
class GapsConfig:
    """Knowledge gaps and hit statistics (gateway/console/gaps): what callers asked that the
    knowledge could not answer, and which documents were served.

    threshold: the default gap threshold on the relevance scale, 0..1 (DEFAULT_GAP_THRESHOLD).
    thresholds: route id → its own threshold (an agent route's name, or
        '{tenant}/{FirstLevelId}/{SecondLevelId}' of a Volcengine route); a question searched
        over several routes uses the lowest of theirs.
    keep_days: retention window of gap groups and hit counts (whole UTC days).
    max_questions: distinct questions (normalized) kept at most; the least recently seen go first.
    keep_text: keep each gap question's text (its personal identifiers masked:
        gateway/console/gaps/mask.py), shown only to admins and the owners of its index; False:
        keyed hashes and counts only, no text anywhere.
    query_retention_seconds: how long a question's text is kept (None: keep_days; never longer).
    max_examples: question texts kept per distinct question.
    key: the HMAC key questions and terms are hashed with (`key_env` / `key_file`); None: a
        random key kept in Redis ('{replay.key_prefix}:gaps:key', made once) or, without
        Redis, in this process.
    flush_seconds: how often a worker writes what it aggregated (background, never the request).
    """

    threshold: float = DEFAULT_GAP_THRESHOLD
    thresholds: Mapping[str, float] = field(default_factory=dict)
    keep_days: int = 30
    max_questions: int = 5000
    query_retention_seconds: int | None = None
    keep_text: bool = True
    max_examples: int = 5
    key: Secret | None = None
    flush_seconds: float = 2.0

    @property
    def text_seconds(self) -> int:
        """How long a kept question text lives (seconds): query_retention_seconds, at most keep_days."""
        days = self.keep_days * 86400 * SECONDS
        return min(self.query_retention_seconds, days) if self.query_retention_seconds is not None else days

    def threshold_of(self, routes: tuple[str, ...]) -> float:
        """The gap threshold of a question searched over `routes` (the lowest of theirs)."""
        return min((self.thresholds.get(r, self.threshold) for r in routes), default=self.threshold)


CONSOLE_ROLES = ("viewer", "owner", "admin")


@dataclass(frozen=True, slots=True)
class ConsoleUserConfig:
    """One console user (`[admin.users.NAME]`; roles in gateway/console/users.py).

    name: the login name, 1-64 of [a-z0-9._-]. role: one of CONSOLE_ROLES. indexes: the
    indexes an owner owns (non-empty for an owner, empty otherwise). credential: the hash of
    the user's credential, 'scrypt$N$r$p$SALT$HASH' (gateway/console/credentials.py); the
    credential itself is never stored.
    """

    name: str
    role: str
    indexes: tuple[str, ...]
    credential: str
