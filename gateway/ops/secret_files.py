"""The secret files kbgate itself writes (`secrets add --value-stdin` or a generated key,
`onboard`'s pasted key), and the record that tells them from files someone else made.

Rationale: docs/design-notes.md, "gateway/ops/secret_files.py".
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

import orjson

from gateway.core.config.edit import write_atomically
from gateway.core.errors import ConfigError

RECORD = ".kbgate-written"  # in the secrets folder: {file name: {dev, ino, size, mtime_ns, salt, hmac_sha256}}
SALT_BYTES = 32


def write_secret_file(fp: Path, value: str) -> Path:
    """Create `fp` (mode 0600, its folder 0700 when made) holding `value` and a newline, and
    record it as written by kbgate. Raises ConfigError when `fp` exists already, OSError when
    it cannot be written (a full disk): then nothing is left at `fp` and a retry can succeed.
    The file is written whole to a temporary name, fsynced and linked to `fp` (a link never
    replaces a file), so `fp` is never seen empty or half written."""
    fp.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if fp.exists() or fp.is_symlink():
        raise ConfigError("secrets", f"file {fp.name} already exists; choose another key id")
    content = (value + "\n").encode("utf-8")
    fd, tmp_name = tempfile.mkstemp(dir=fp.parent, prefix=f".{fp.name}.", suffix=".tmp")  # mode 0600
    tmp = Path(tmp_name)
    linked = False
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, fp)
        except FileExistsError:
            raise ConfigError("secrets", f"file {fp.name} already exists; choose another key id") from None
        linked = True
        st = fp.lstat()
        salt = secrets.token_bytes(SALT_BYTES)
        written = _read(fp.parent)
        written[fp.name] = {"dev": st.st_dev, "ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns,
                            "salt": salt.hex(), "hmac_sha256": _digest(salt, content)}
        _write(fp.parent, written)
    except BaseException:
        if linked:
            fp.unlink(missing_ok=True)
        raise
    finally:
        tmp.unlink(missing_ok=True)
    return fp


def why_not_kbgates(fp: Path) -> str | None:
    """None when `fp` is a regular file (not a symlink) that kbgate wrote and nobody replaced or
    changed since: its folder's record names it with its current device, inode, size, mtime_ns
    and the HMAC-SHA256 (record's salt) of its content. Else the reason, for the operator:
    e.g. 'its content changed since kbgate wrote it'. Reads the file (at most its recorded size
    + 1 bytes); never raises."""
    try:
        st = fp.lstat()
    except OSError:
        return "it cannot be read"
    entry = _read(fp.parent).get(fp.name)
    if not os.path.isfile(fp) or fp.is_symlink():
        return "it is not a regular file"
    if not isinstance(entry, dict) or not {"dev", "ino", "size", "mtime_ns", "salt", "hmac_sha256"} <= entry.keys():
        return f"kbgate did not write it (or recorded it without a content digest in {RECORD})"
    if [entry["dev"], entry["ino"]] != [st.st_dev, st.st_ino]:
        return "it was replaced since kbgate wrote it (another file now has its name)"
    if entry["size"] != st.st_size or entry["mtime_ns"] != st.st_mtime_ns:
        return "it was rewritten since kbgate wrote it (its size or modification time changed)"
    try:
        with fp.open("rb") as f:
            content = f.read(int(entry["size"]) + 1)
        salt = bytes.fromhex(str(entry["salt"]))
    except (OSError, ValueError):
        return "it cannot be read"
    if not hmac.compare_digest(_digest(salt, content).encode(), str(entry["hmac_sha256"]).encode()):
        return "its content changed since kbgate wrote it"
    return None


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


def _digest(salt: bytes, content: bytes) -> str:
    return hmac.new(salt, content, hashlib.sha256).hexdigest()


def _read(folder: Path) -> dict[str, Any]:
    try:
        data = orjson.loads((folder / RECORD).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}  # no record (or a damaged one): nothing counts as written by kbgate
    return {str(k): v for k, v in data.items()} if isinstance(data, dict) else {}


def _write(folder: Path, written: dict[str, Any]) -> None:
    write_atomically(folder / RECORD, orjson.dumps(written, option=orjson.OPT_SORT_KEYS).decode(), 0o600)
