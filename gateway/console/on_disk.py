"""The config file as it is now, for the console pages that show what an edit just changed.

A console edit (a key, a user) lands in the file at once, but each worker loads it only at its
next reload (gateway/serve/reload.py, within a second): a page read right after the edit's
redirect shows the file, so the change is visible on the very next page.
"""

from __future__ import annotations

from gateway.core.config import Config, load_config
from gateway.core.errors import ConfigError


def file_config(config: Config, *, read_secrets: bool = False) -> Config:
    """The config file of `config` as it is now (blocking: run it in a worker thread); `config`
    itself when it came from no file or the file cannot be loaded (the worker keeps serving
    `config` then, and /readyz says why)."""
    if config.source is None:
        return config
    try:
        return load_config(config.source, read_secrets=read_secrets)
    except ConfigError:
        return config
