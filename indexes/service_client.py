"""The HTTP client of a model service (embeddings, rerank): JSON, its Bearer key, no redirects,
a bounded connection pool."""

from __future__ import annotations

import httpx

from indexes.types.secret import Secret


def service_client(api_key: Secret | None, transport: httpx.BaseTransport | None = None) -> httpx.Client:
    """An httpx.Client sending `Accept: application/json` and, with `api_key`, `Authorization:
    Bearer`; at most 16 connections (8 kept alive). transport: tests pass a real server's."""
    headers = {"Accept": "application/json"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key.reveal()}"
    return httpx.Client(headers=headers, transport=transport, follow_redirects=False,
                        limits=httpx.Limits(max_connections=16, max_keepalive_connections=8))
