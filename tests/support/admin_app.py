"""An app started from a config FILE for the console's admin edits (users, tenants, routes,
indexes, synonyms): acme → docs, agent route support → docs, the admin token, a viewer and
an owner of docs; the indexes a private copy, free to change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.console.credentials import hash_credential
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, TOKEN_ALICE, client, config, tenant, write

VIEWER, OWNER = "viewer-credential-0123456789abcdef", "owner-credential-0123456789abcdefg"
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
AS_VIEWER = {"authorization": f"Bearer vera:{VIEWER}"}
AS_OWNER = {"authorization": f"Bearer otto:{OWNER}"}
_HASHES: dict[str, str] = {}


def _hash(credential: str) -> str:
    if credential not in _HASHES:
        _HASHES[credential] = hash_credential(credential)
    return _HASHES[credential]


def admin_config(root: Path, indexes: Path, **more: Any) -> Path:
    """Write root/gateway.toml (module doc); returns its path. more: further tables."""
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["knowledge.search"], datasets=["*"],
                                         path_globs=["**"])}}
    data = config(root, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=indexes, admin_token=ADMIN_TOKEN, agent=agent, **{"audit": {"sink": "off"}, **more})
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": _hash(VIEWER)},
                              "otto": {"role": "owner", "indexes": ["docs"], "credential": _hash(OWNER)}}
    return write(root / "gateway.toml", data)


async def admin_app(tmp_path: Path, indexes: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch,
                    **more: Any) -> tuple[httpx.AsyncClient, Any, Path]:
    """(client, the Gateway, the config file) of an app started from `admin_config`."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    path = admin_config(tmp_path, indexes, **more)
    c, gw, _ = await start_app(load_config(path), clock=SYSTEM_CLOCK)
    return c, gw, path
