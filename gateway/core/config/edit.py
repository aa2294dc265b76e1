"""Editing the config file in place: one edit at a time, a tomlkit round trip, validated, then
an atomic rename.

Rationale: docs/design-notes.md, "gateway/core/config/edit.py".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import tomlkit
from tomlkit.items import AoT, Table
from tomlkit.toml_document import TOMLDocument

from gateway.core.config.load import parse_config
from gateway.core.config.model import Config
from gateway.core.errors import ConfigError
from gateway.core.types import SECONDS

RELOAD_INTERVAL = 1 * SECONDS  # how often a running server looks at its config file for changes
LOCK_WAIT = 10 * SECONDS  # how long an edit waits for another edit's lock before it is refused
LOCK_POLL = 0.02  # seconds between two tries of a held lock

class ConfigConflict(ConfigError):
    """An edit refused, nothing written (status 409, code 'config_changed'): the file is not what
    its caller read (another admin or `kbgate` changed it meanwhile), or (`busy`) another edit
    held its lock past LOCK_WAIT. Reading the file again and redoing the change is the remedy."""

    code = "config_changed"
    status = 409

    def __init__(self, key: str, problem: str, *, file: str | os.PathLike[str] | None = None,
                 busy: bool = False) -> None:
        super().__init__(key, problem, file=file)
        self.busy = busy


CHANGED = ("changed since it was read (another admin or a kbgate command edited it): nothing was "
           "changed; read it again and redo the change")


def lock_path(path: Path) -> Path:
    """The lock file of the config file `path`: `.<name>.lock` in the same folder."""
    return path.with_name(f".{path.name}.lock")


def file_digest(path: Path) -> str | None:
    """SHA-256 (hex) of the config file's bytes, or None when it cannot be read: the `base`
    a page or a command hands back to `edit_config`."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


@contextlib.contextmanager
def config_lock(path: Path, wait: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock of the config file `path` (an flock on `lock_path(path)`, made
    0600 when absent) for the block: every kbgate process and worker that edits the file takes
    it. Waits up to `wait` seconds (default LOCK_WAIT), then raises ConfigConflict (busy);
    ConfigError when the lock file cannot be made or locked (a folder this process cannot
    write: no edit could be written there either)."""
    lock = lock_path(Path(path))
    wait = LOCK_WAIT if wait is None else wait
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be locked for an edit ({lock.name}: {exc.strerror or exc})",
                          file=path) from None
    try:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                    raise ConfigError("<file>", f"cannot be locked for an edit ({lock.name}: {exc.strerror or exc})",
                                      file=path) from None
                if time.monotonic() >= deadline:
                    raise ConfigConflict("<file>", f"is being edited by another process (its lock {lock.name} "
                                         f"was held for {wait:.0f} s): nothing was changed; try again",
                                         file=path, busy=True) from None
                time.sleep(LOCK_POLL)
        yield
    finally:
        os.close(fd)  # releases the lock


def edit_config(path: Path, mutate: Callable[[TOMLDocument], None],
                check: Callable[[Config], None] | None = None, *, base: str | None = None,
                written: Callable[[str], None] | None = None) -> Config:
    """Apply `mutate` to the TOML document at `path`, validate, then replace the file atomically,
    all under `config_lock(path)`: `mutate` sees the file as the last edit left it.

    check(config): a further rule on the validated result (raise ConfigError to refuse).
    base: the SHA-256 (hex) of the file as the caller read it (`file_digest`); when given and
    the file is no longer that, ConfigConflict and nothing is written.
    written(text): called with the text written, still under the lock (what `kbgate onboard`
    compares the file with before it puts the file back).
    Returns the validated new Config, its secrets unread (`load_config(read_secrets=False)`:
    an edit needs no secret's value, so a value_env this shell lacks stops no edit; the caller
    checks the value of a secret it adds). Raises ConfigError naming the key when the edited
    document is invalid (the file is left untouched) or the file cannot be read; ConfigConflict
    (a ConfigError, status 409) for a changed file or a lock held past LOCK_WAIT.
    """
    path = Path(path).resolve()
    with config_lock(path):
        try:
            raw = path.read_bytes()
            mode = path.stat().st_mode & 0o777
            text = raw.decode("utf-8")
        except OSError as exc:  # the reason the system gives ("No such file or directory"), as check-config says
            raise ConfigError("<file>", f"cannot be read: {exc.strerror or exc}", file=path) from None
        except UnicodeDecodeError:
            raise ConfigError("<file>", "cannot be read as UTF-8", file=path) from None
        if base is not None and hashlib.sha256(raw).hexdigest() != base:
            raise ConfigConflict("<file>", CHANGED, file=path)
        try:
            doc = tomlkit.parse(text)
        except Exception as exc:  # tomlkit raises its own ParseError family
            raise ConfigError("<file>", f"is not valid TOML: {exc}", file=path) from None
        mutate(doc)
        config = parse_config(doc.unwrap(), base_dir=path.parent, source=path, read_secrets=False)
        if check is not None:
            check(config)
        text = tomlkit.dumps(doc)
        write_atomically(path, text, mode)
        if written is not None:
            written(text)
        return config


def write_atomically(path: Path, text: str | bytes, mode: int | None) -> None:
    """Replace the file at `path` by `text` (a str is written as UTF-8) with permission bits
    `mode` (e.g. 0o640; None: 0o600).

    A temporary file in the same folder, fsynced, then renamed over `path`: a reader (the
    server's Reloader) sees the old file or the whole new one, never a part. Raises OSError;
    the temporary file is removed then.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # mode 0600
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is not None:
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
