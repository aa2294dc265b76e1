"""`/admin/users`: who may use the console, with which role (admins only; `kbgate users` changes it).

GET /admin/users        the list (HTML)        GET /admin/users.json   {"users": [...], "admin_token": bool}
Never a credential or its hash.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console.render import gate, json_answer, page, runtime
from gateway.core.methods import json_route


def _users(request: Request) -> dict[str, Any]:
    admin = runtime(request).config.admin
    return {"users": [{"name": u.name, "role": u.role, "indexes": list(u.indexes)} for u in admin.users],
            "admin_token": admin.token_sha256 is not None}


async def users_html(request: Request) -> Response:
    """GET /admin/users."""
    user = await gate(request, "manage_users", active="users")
    if isinstance(user, Response):
        return user
    return page(request, user, "users.html", active="users", title="Users", **_users(request))


async def users_json(request: Request) -> Response:
    """GET /admin/users.json."""
    user = await gate(request, "manage_users", as_json=True)
    if isinstance(user, Response):
        return user
    return json_answer(_users(request))


ROUTES = [Route("/admin/users", users_html, methods=["GET"]), json_route("/admin/users.json", users_json, ["GET"])]
