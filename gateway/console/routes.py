"""Every route of the console, in one list the app mounts (gateway/serve/app.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.console import (
    browse,
    deliveries_view,
    language,
    login,
    overview,
    placeholders,
    synonyms_page,
    tenants_actions,
    tenants_page,
    try_page,
    users_page,
)
from gateway.console.gaps import ROUTES as GAP_ROUTES

ROUTES: list[BaseRoute] = [*login.ROUTES, *language.ROUTES, *overview.ROUTES, *deliveries_view.ROUTES, *try_page.ROUTES,
                           *GAP_ROUTES, *synonyms_page.ROUTES, *users_page.ROUTES, *browse.ROUTES, *tenants_page.ROUTES,
                           *tenants_actions.ROUTES, *placeholders.ROUTES]
