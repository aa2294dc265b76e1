"""Who the console's client is behind a reverse proxy: its scheme and its address.

Rationale: docs/design-notes.md, "gateway/console/proxy.py".
"""

from __future__ import annotations

import functools
import ipaddress

from starlette.requests import Request

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@functools.lru_cache(maxsize=64)
def _networks(trusted: tuple[str, ...]) -> tuple[IpNetwork, ...]:
    return tuple(ipaddress.ip_network(n, strict=False) for n in trusted)


def _trusted(address: str | None, trusted: tuple[str, ...]) -> bool:
    if not address or not trusted:
        return False
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return False
    return any(ip in n for n in _networks(trusted))


def _proxies(request: Request) -> tuple[str, ...]:
    proxies: tuple[str, ...] = request.app.state.runtime.config.server.trusted_proxies
    return proxies


def _peer(request: Request) -> str | None:
    return request.client.host if request.client else None


def scheme(request: Request) -> str:
    """'https' or 'http': how the client reached us (module docstring)."""
    if _trusted(_peer(request), _proxies(request)):
        forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
        if forwarded in ("http", "https"):
            return forwarded
    return request.url.scheme


def secure(request: Request) -> bool:
    """Did the request come over TLS (to us, or to a trusted proxy)? The cookies' Secure flag."""
    return scheme(request) == "https"


def client_address(request: Request) -> str | None:
    """The client's address (module docstring); None when the server sees no peer."""
    peer = _peer(request)
    proxies = _proxies(request)
    if not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for h in ",".join(request.headers.getlist("x-forwarded-for")).split(",") if h.strip()]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            try:
                return str(ipaddress.ip_address(hop))
            except ValueError:
                return peer  # a hop that is no address: the proxy's word cannot be read
    return hops[0] if hops else peer
