"""The confirmation page of a destructive console step (no JavaScript): what happens, and one
form that posts the same fields again with confirm=1; "no" is a link back.

    confirm_page(request, user, title=, what=, action=, form=, fields={...}, yes=, no=, back=, active=)
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.requests import Request
from starlette.responses import Response

from gateway.console.render import page
from gateway.console.users import ConsoleUser


def confirmed(fields: Mapping[str, str], by_tool: bool) -> bool:
    """Whether a destructive POST goes ahead: a tool (Bearer) asks once; a browser confirms."""
    return by_tool or fields.get("confirm") == "1"


def confirm_page(request: Request, user: ConsoleUser, *, title: str, what: str, action: str, form: str,
                 fields: Mapping[str, str], yes: str, no: str, back: str, active: str) -> Response:
    """The confirmation page (module doc); `form` is the CSRF form name the step checks."""
    return page(request, user, "confirm.html", active=active, title=title, what=what, action=action, form=form,
                fields=dict(fields), yes=yes, no=no, back=back)
