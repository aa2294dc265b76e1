"""The end-to-end tests' real servers: `serve` builds a `kbgate serve` on a free loopback port
from the process helpers the gateway's own eval and bench/ use (gateway.ops.processes).

Rationale: docs/design-notes.md, "tests/support/harness.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.console.credentials import hash_credential
from gateway.ops.processes import LISTENING, Server, children, free_port, kbgate, kbgate_argv
from tests.support.configs import (
    ACME_KEYS,
    ADMIN_TOKEN,
    ENV,
    EVERYTHING,
    TOKEN_ALICE,
    acme_toml,
    client,
    config,
    tenant,
    write,
)

__all__ = ["LISTENING", "Server", "acme_server", "bearer_json", "children", "free_port", "kbgate", "kbgate_argv",
           "owner_site", "serve"]


def serve(config: Path, *, port: int | None = None, workers: int = 1, env: Mapping[str, str | None] | None = None,
          log_path: Path | None = None, cwd: Path | None = None) -> Server:
    """A `kbgate serve` of `config` on a free port (or `port`), `workers` workers; not started yet.
    Its log defaults to serve-PORT.log beside the config."""
    port = port or free_port()
    return Server(kbgate_argv(config, bind=f"127.0.0.1:{port}", workers=workers), port,
                  log_path=log_path or config.parent / f"serve-{port}.log", env=env, cwd=cwd, workers=workers)


def acme_server(tmp: Path, docs_index: Path, *, redis_url: str, secret: str, name: str, **over: Any) -> Server:
    """One worker of `kbgate serve` for tenant acme signing with `secret` (key k1, its file in
    `tmp`) over `docs_index`, Redis keys under kbgate-NAME-PORT; `over`: more of acme_toml's
    arguments. Not started yet."""
    (tmp / "secret").write_text(secret)
    port = free_port()
    cfg = tmp / "gateway.toml"
    cfg.write_text(acme_toml(docs_index, port=port, redis_url=redis_url, prefix=f"kbgate-{name}-{port}", workers=1,
                             secrets=[("k1", "secret")], **over), "utf-8")
    return serve(cfg, port=port, workers=1)


def bearer_json(url: str, token: str, body: Mapping[str, Any]) -> Any:
    """POST `body` as JSON to `url` with `token` as its Bearer token; the answer's JSON, asserted
    to be HTTP 200."""
    r = httpx.post(url, content=orjson.dumps(body), timeout=10,
                   headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    return orjson.loads(r.content)


def owner_site(tmp_path: Path, index: Path, redis_url: str, name: str, owner_credential: str,
               synonyms: bool = True, **over: Any) -> Server:
    """A `kbgate serve` (not started) of index `index` named kb (with an empty synonyms file, or
    none when not `synonyms`), owner `otto` of kb, agent client alice on route support (Dify
    retrieval), tenant acme, the admin token; Redis keys under kbgate-NAME-PORT; `over` adds or
    replaces config tables."""
    port = free_port()
    if synonyms:
        (tmp_path / "synonyms").mkdir()
        (tmp_path / "synonyms" / "kb.txt").write_text("# kb: the owners' words\n", "utf-8")
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "kb"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(tmp_path, **{"tenants": [tenant("acme", keys=ACME_KEYS)], "indexes": index, "port": port,
                               "redis_url": redis_url, "key_prefix": f"kbgate-{name}-{port}",
                               "admin_token": ADMIN_TOKEN, "agent": agent, "audit": {"sink": "off"},
                               "access": {"sqlite_path": str(tmp_path / "feedback.sqlite3")}, **over})
    if synonyms:
        data["indexes"]["kb"] = {"synonyms": "synonyms/kb.txt"}
    data["admin"]["users"] = {"otto": {"role": "owner", "indexes": ["kb"],
                                       "credential": hash_credential(owner_credential)}}
    return serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV)
