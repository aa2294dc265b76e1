"""Every route of the console, in one list the app mounts (gateway/serve/app.py)."""

from __future__ import annotations

from starlette.routing import BaseRoute

from gateway.console import (
    browse,
    deliveries_view,
    index_manage,
    language,
    login,
    overview,
    placeholders,
    routes_remove,
    synonyms_page,
    synonyms_start,
    tenants_actions,
    tenants_edit,
    tenants_page,
    tenants_reveal,
    try_page,
    users_edit,
    users_page,
)
from gateway.console.gaps import ROUTES as GAP_ROUTES

ROUTES: list[BaseRoute] = [
    *login.ROUTES, *language.ROUTES, *overview.ROUTES, *deliveries_view.ROUTES, *try_page.ROUTES, *GAP_ROUTES,
    *synonyms_start.ROUTES, *synonyms_page.ROUTES, *users_edit.ROUTES, *users_page.ROUTES,
    *index_manage.ROUTES, *browse.ROUTES,
    *tenants_page.ROUTES, *tenants_actions.ROUTES, *tenants_edit.ROUTES, *routes_remove.ROUTES,
    *tenants_reveal.ROUTES, *placeholders.ROUTES,
]
