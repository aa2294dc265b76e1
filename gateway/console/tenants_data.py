"""The Tenants page's values (its page and its JSON twin serve the same dicts): what a
Volcengine console admin pastes, each key's state and last use, and where rotation stands.

Rationale: docs/design-notes.md, "gateway/console/tenants_data.py".
"""

from __future__ import annotations

from typing import Any

from redis.exceptions import RedisError
from starlette.requests import Request

from gateway.console.tenants_reveal import showable
from gateway.core.config import Config, SecretKey, Tenant
from gateway.core.errors import DependencyUnavailable
from gateway.volcengine.keyuse import KeyUsage


def key_state(key: SecretKey, now: float) -> str:
    """'live' (no not_after), 'retiring' (not_after still ahead) or 'retired' (passed)."""
    if key.not_after is None:
        return "live"
    return "retiring" if key.live(now) else "retired"


def callback_url(config: Config, request: Request, tenant: Tenant) -> tuple[str, str]:
    """(the URL to paste into 知识库配置, where its base came from: 'server.public_url' | 'request')."""
    if config.server.public_url:
        return config.server.public_url + tenant.path, "server.public_url"
    return str(request.base_url).rstrip("/") + tenant.path, "request"


def test_url(config: Config, request: Request, tenant: Tenant) -> str:
    """Where the connectivity test POSTs: server.public_url + path, else this worker's own
    listening socket (scope['server']: the local address, not the client's Host header)."""
    if config.server.public_url:
        return config.server.public_url + tenant.path
    host, port = request.scope.get("server") or ("127.0.0.1", 80)
    port = port or 80  # None: a server without a port of its own (an in-process client)
    host = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{tenant.path}"


async def tenant_view(config: Config, on_disk: Config, request: Request, usage: KeyUsage, name: str,
                      now: float) -> dict[str, Any] | None:
    """The values of tenant `name` (module doc), or None when it is in neither config.
    `config`: what this worker serves; `on_disk`: `file_config(config)`."""
    tenant = on_disk.tenants.get(name) or config.tenants.get(name)
    if tenant is None:
        return None
    loaded = {k.id for k in config.tenants[name].secrets} if name in config.tenants else set()
    usage_error = False
    try:
        used = await usage.read(name, [k.id for k in tenant.secrets])
    except (RedisError, OSError, TimeoutError, DependencyUnavailable):
        used, usage_error = {}, True
    keys = []
    for k in tenant.secrets:
        u = used.get(k.id)
        keys.append({"id": k.id, "state": key_state(k, now), "not_after": k.not_after,
                     "last_used": u.last if u else None, "count": u.count if u else 0, "loaded": k.id in loaded,
                     "showable": showable(k)})
    live = [k for k in keys if k["state"] != "retired"]
    newest = live[-1] if live else None
    url, url_from = callback_url(config, request, tenant)
    return {"name": name, "path": tenant.path, "callback_url": url, "url_from": url_from,
            "test_url": test_url(config, request, tenant), "mode": tenant.mode(now),
            "report_until": tenant.report_until,
            "routes": [{"first": r.first_level_id, "second": r.second_level_id, "index": r.index}
                       for r in tenant.routes],
            "keys": keys, "newest": newest["id"] if newest else None,
            "older_live": [k["id"] for k in live[:-1]], "newest_used": bool(newest and newest["count"]),
            "usage_error": usage_error}
