"""Every change made through the console or `kbgate users` is audited with who made it.

Rationale: docs/design-notes.md, "gateway/console/changes.py".
"""

from __future__ import annotations

import getpass
import time
import uuid
from typing import Any

from gateway.core import audit
from gateway.core.config import Config
from gateway.core.scope import Principal


def cli_user() -> str:
    """'cli:<login name>' of whoever runs a `kbgate` command ('cli:unknown' when none)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):
        return "cli:unknown"


def audit_change(config: Config, who: str, action: str, target: str, *, status: int = 200,
                 **extra: Any) -> None:
    """Write the audit line of one change: `who` did `action` (e.g. 'file_gap', 'users.add')
    on `target` (an index, a group, a user), answered `status`. Never raises."""
    event = audit.AuditEvent(ts=time.time(), request_id=uuid.uuid4().hex[:16], tool=f"admin.{action}", route=target,
                             wing="admin", principal=Principal("console_user", who),
                             outcome=audit.outcome_of(status), status=status, extra=dict(extra))
    audit.write(config.audit, event)
