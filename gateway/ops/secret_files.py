"""The secret files kbgate itself writes (`secrets add --value-stdin` or a generated key,
`onboard`'s pasted key), and the record that tells them from files someone else made.

A file is deleted by `secrets retire --remove` only when kbgate wrote it: its name, device and
inode are in `secrets/.kbgate-written` (JSON, mode 0600, no secret in it) and the file on disk
is still that one. A file made by hand at a path that looks generated
(`secrets/<tenant>-<id>`), or a generated file that was replaced since (an editor's rename
gives a new inode), is never deleted by its name alone.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import orjson

from gateway.core.config.edit import write_atomically
from gateway.core.errors import ConfigError

RECORD = ".kbgate-written"  # in the secrets folder: {file name: [st_dev, st_ino]}


def write_secret_file(fp: Path, value: str) -> Path:
    """Create `fp` (mode 0600, its folder 0700 when made) holding `value` and a newline, and
    record it as written by kbgate. Raises ConfigError when `fp` exists already."""
    fp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(fp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError("secrets", f"file {fp.name} already exists; choose another key id") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(value + "\n")
    st = fp.lstat()
    written = _read(fp.parent)
    written[fp.name] = [st.st_dev, st.st_ino]
    _write(fp.parent, written)
    return fp


def kbgate_wrote(fp: Path) -> bool:
    """Whether `fp` is a regular file (not a symlink) that kbgate wrote and nobody replaced
    since: its folder's record names it with its current device and inode."""
    try:
        st = fp.lstat()
    except OSError:
        return False
    entry = _read(fp.parent).get(fp.name)
    return os.path.isfile(fp) and not fp.is_symlink() and entry == [st.st_dev, st.st_ino]


def forget(fp: Path) -> None:
    """Drop `fp` from its folder's record (after deleting it); the record goes when empty."""
    written = _read(fp.parent)
    if written.pop(fp.name, None) is None:
        return
    if written:
        _write(fp.parent, written)
    else:
        with contextlib.suppress(OSError):
            (fp.parent / RECORD).unlink()


def _read(folder: Path) -> dict[str, list[int]]:
    try:
        data = orjson.loads((folder / RECORD).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}  # no record (or a damaged one): nothing counts as written by kbgate
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}


def _write(folder: Path, written: dict[str, list[int]]) -> None:
    write_atomically(folder / RECORD, orjson.dumps(written, option=orjson.OPT_SORT_KEYS).decode(), 0o600)
