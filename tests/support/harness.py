"""The end-to-end tests' real servers: `serve` builds a `kbgate serve` on a free loopback port
from the process helpers the gateway's own eval and bench/ use (gateway.ops.processes).

Rationale: docs/design-notes.md, "tests/support/harness.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gateway.ops.processes import LISTENING, Server, children, free_port, kbgate, kbgate_argv

__all__ = ["LISTENING", "Server", "children", "free_port", "kbgate", "kbgate_argv", "serve"]


def serve(config: Path, *, port: int | None = None, workers: int = 1, env: Mapping[str, str | None] | None = None,
          log_path: Path | None = None, cwd: Path | None = None) -> Server:
    """A `kbgate serve` of `config` on a free port (or `port`), `workers` workers; not started yet.
    Its log defaults to serve-PORT.log beside the config."""
    port = port or free_port()
    return Server(kbgate_argv(config, bind=f"127.0.0.1:{port}", workers=workers), port,
                  log_path=log_path or config.parent / f"serve-{port}.log", env=env, cwd=cwd, workers=workers)
