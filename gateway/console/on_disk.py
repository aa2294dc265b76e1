"""The config file as it is now, for the console pages that show what an edit just changed.

Rationale: docs/design-notes.md, "gateway/console/on_disk.py".
"""

from __future__ import annotations

from gateway.core.config import Config, load_config
from gateway.core.config.edit import ConfigConflict, file_digest
from gateway.core.errors import ConfigError

CHANGED = ("the configuration changed since this page was opened (another admin or a kbgate command "
           "edited it), so nothing was changed. Open the page again, check what changed, and redo the change.")
BUSY = "another edit of the configuration held its lock too long, so nothing was changed. Try again in a moment."


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


def file_base(config: Config) -> str | None:
    """The `base` a page puts in its forms: the SHA-256 of `config`'s file as it is now
    (blocking), None when it came from no file or the file cannot be read."""
    return file_digest(config.source) if config.source is not None else None


def conflict_text(err: ConfigConflict) -> str:
    """What a page says of a refused edit (ConfigConflict: 409), without the file's path."""
    return BUSY if err.busy else CHANGED
