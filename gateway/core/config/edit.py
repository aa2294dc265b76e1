"""Editing the config file in place: a tomlkit round trip, validated, then an atomic rename.

Comments, order and layout are kept. The edited document is validated with the same
`parse_config` the server uses BEFORE anything is written, and lands with an atomic rename
(same folder, same file mode), so a running server's `Reloader` (gateway/serve/reload.py)
sees either the old file or the whole new one. Used by `kbgate secrets` and `kbgate onboard`.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import tomlkit
from tomlkit.items import AoT, Table
from tomlkit.toml_document import TOMLDocument

from gateway.core.config.load import parse_config
from gateway.core.config.model import Config
from gateway.core.errors import ConfigError
from gateway.core.types import SECONDS

RELOAD_INTERVAL = 1 * SECONDS  # how often a running server looks at its config file for changes


def edit_config(path: Path, mutate: Callable[[TOMLDocument], None],
                check: Callable[[Config], None] | None = None) -> Config:
    """Apply `mutate` to the TOML document at `path`, validate, then replace the file atomically.

    check(config): a further rule on the validated result (raise ConfigError to refuse).
    Returns the validated new Config, its secrets unread (`load_config(read_secrets=False)`:
    an edit needs no secret's value, so a value_env this shell lacks stops no edit; the caller
    checks the value of a secret it adds). Raises ConfigError naming the key when the edited
    document is invalid (the file is left untouched) or the file cannot be read.
    """
    path = Path(path).resolve()
    try:
        text = path.read_text("utf-8")
        mode = path.stat().st_mode & 0o777
    except OSError as exc:  # the reason the system gives ("No such file or directory"), as check-config says
        raise ConfigError("<file>", f"cannot be read: {exc.strerror or exc}", file=path) from None
    except UnicodeDecodeError:
        raise ConfigError("<file>", "cannot be read as UTF-8", file=path) from None
    try:
        doc = tomlkit.parse(text)
    except Exception as exc:  # tomlkit raises its own ParseError family
        raise ConfigError("<file>", f"is not valid TOML: {exc}", file=path) from None
    mutate(doc)
    config = parse_config(doc.unwrap(), base_dir=path.parent, source=path, read_secrets=False)
    if check is not None:
        check(config)
    write_atomically(path, tomlkit.dumps(doc), mode)
    return config


def write_atomically(path: Path, text: str, mode: int) -> None:
    """Replace the file at `path` by `text` (UTF-8) with permission bits `mode` (e.g. 0o640).

    A temporary file in the same folder, fsynced, then renamed over `path`: a reader (the
    server's Reloader) sees the old file or the whole new one, never a part. Raises OSError;
    the temporary file is removed then.
    """
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def tenant_table(doc: TOMLDocument, tenant: str) -> Table:
    """The `[tenants.<tenant>]` table of a document. Raises ConfigError when absent."""
    tenants = doc.get("tenants")
    if tenants is None or tenant not in tenants:
        raise ConfigError(f"tenants.{tenant}", "does not exist in this config")
    table: Table = tenants[tenant]
    return table


def array_of_tables(t: Table, name: str) -> AoT:
    """The array of tables `name` of table `t` (`[[...secrets]]`), created empty when absent."""
    if name not in t:
        t[name] = tomlkit.aot()
    aot: AoT = t[name]
    return aot
