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

from gateway.ops.processes import LISTENING, Server, children, free_port, kbgate, kbgate_argv
from tests.support.configs import acme_toml

__all__ = ["LISTENING", "Server", "acme_server", "bearer_json", "children", "free_port", "kbgate", "kbgate_argv",
           "serve"]


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
