"""What every admin change of the config file from the console shares (users, tenants, routes,
indexes): who may (a 403 naming the role, audited), whether a tool asks (Bearer: JSON answers,
no confirmation page), and the answer to a refused edit, naming the config key, never a 500.
Usage: docs/design-notes.md, "gateway/console/admin_edit.py".
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gateway.console.auth import bearer
from gateway.console.changes import audit_change
from gateway.console.i18n import _
from gateway.console.on_disk import conflict_text
from gateway.console.render import Answered, gate, refusal, runtime
from gateway.console.users import ConsoleUser, can
from gateway.core.config import Config
from gateway.core.config.edit import ConfigConflict
from gateway.core.errors import ConfigError


def by_tool(request: Request) -> bool:
    """Whether a tool asks (Authorization: Bearer): JSON answers, and one POST does it."""
    return bearer(request.headers.get("authorization")) is not None


async def admin_of(request: Request, action: str, audited: str, target: str, *,
                   active: str) -> tuple[ConsoleUser, bool]:
    """(the user, whether a tool asks) when they may do `action` (users.can, e.g. 'manage_users');
    else the answer: the login, or a 403 naming their role (audited as `audited` on `target`)."""
    tool = by_tool(request)
    user = await gate(request, "view", as_json=tool, active=active)
    if not can(user, action):
        audit_change(runtime(request).config, user.name, audited, target, status=403)
        raise Answered(refusal(request, user, as_json=tool, status=403, active=active, text=_(
                    "Your role (%(role)s) does not allow this: only an admin does. Nothing was changed.",
                    role=user.role_label)))
    return user, tool


def source_of(config: Config) -> Path:
    """The config file the server was started from. Raises ConfigError when there is none."""
    if config.source is None:
        raise ConfigError("<file>", _("this server was not started from a config file: change it on the server"))
    return Path(config.source)


def refused_edit(request: Request, user: ConsoleUser, tool: bool, err: ConfigError, what: str, *, active: str,
                 audited: str, target: str, **audit: Any) -> Response:
    """The answer to an edit the config refused: 409 for a file changed since the page was drawn
    (or a lock held too long), else 400 naming the key; audited with its status."""
    status = 409 if isinstance(err, ConfigConflict) else 400
    audit_change(runtime(request).config, user.name, audited, target, status=status, **audit)
    text = conflict_text(err) if isinstance(err, ConfigConflict) else _(
        "%(key)s: %(problem)s. Nothing was changed.", key=err.key, problem=err.message)
    return refusal(request, user, as_json=tool, status=status, active=active, text=f"{what}: {text}")
