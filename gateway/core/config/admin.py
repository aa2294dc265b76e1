"""`[admin]`: the console and the deliveries record (AdminConfig documents each key).

Rationale: docs/design-notes.md, "gateway/core/config/admin.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gateway.core.config.fields import INDEX_NAME, SHA256_HEX, read_secret, secret_ref, shorter_than
from gateway.core.config.model import AdminConfig
from gateway.core.config.owners import CONSOLE_ROLES, ConsoleUserConfig
from gateway.core.errors import ConfigError
from gateway.core.types import Secret
from gateway.core.validate import Fields

USER_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# scrypt$N$r$p$salt$hash, salt and hash unpadded base64url (gateway/console/credentials.py)
CREDENTIAL_HASH = re.compile(r"scrypt\$[1-9][0-9]{0,7}\$[1-9][0-9]?\$[1-9][0-9]?"
                             r"\$[A-Za-z0-9_-]{16,64}\$[A-Za-z0-9_-]{32,128}")


MIN_SESSION_SECRET_CHARS = 32


def parse_admin(t: Fields, base_dir: Path, env: Mapping[str, str]) -> AdminConfig:
    """The [admin] table → AdminConfig. base_dir: where a relative session_secret_file is;
    env: where session_secret_env is looked up. Raises ConfigError naming the key."""
    t.only({"token_sha256", "show_queries", "keep_deliveries", "users", "session_secret_env", "session_secret_file",
            "state_file", "keep_deleted_days"})
    digest = t.data.get("token_sha256")
    if digest is not None and (not isinstance(digest, str) or not SHA256_HEX.fullmatch(digest)):
        raise ConfigError("admin.token_sha256", "must be 64 lower-case hex characters: the SHA-256 of the "
                          "admin token, not the token (kbgate admin-token prints both)")
    users = t.table("users")
    parsed = tuple(_user(users, name) for name in users.data)
    return AdminConfig(digest, t.boolean("show_queries", False), t.integer("keep_deliveries", 200, lo=1, hi=10_000),
                       parsed, _session_secret(t, base_dir, env),
                       base_dir / t.string("state_file") if "state_file" in t else None,
                       t.integer("keep_deleted_days", 7, lo=0, hi=365))


def _session_secret(t: Fields, base_dir: Path, env: Mapping[str, str]) -> Secret | None:
    """`admin.session_secret_env` | `admin.session_secret_file`: at least 32 characters; a file
    must be readable by its owner only (mode 600 or 400), since whoever reads it can sign a
    session. None when neither is given. Raises ConfigError naming the key, never the value."""
    ref = secret_ref(t, "session_secret_env", "session_secret_file", required=False)
    if ref is None:
        return None
    source, key = ref
    if source.startswith("file:"):
        fp = Path(source[5:]) if Path(source[5:]).is_absolute() else base_dir / source[5:]
        try:
            mode = fp.stat().st_mode & 0o777
        except OSError:
            mode = 0  # read_secret names the missing file
        if mode & 0o077:
            raise ConfigError(key, f"names file {source[5:]}, which others may read (mode {mode:o}): whoever reads "
                                   "it can sign a console session; chmod 600 it")
    secret = read_secret(source, key, base_dir, env)
    if shorter_than(secret, MIN_SESSION_SECRET_CHARS):
        raise ConfigError(key, f"is shorter than {MIN_SESSION_SECRET_CHARS} characters")
    return secret


def _user(users: Fields, name: str) -> ConsoleUserConfig:
    key = users.key(name)
    if not USER_NAME.fullmatch(name) or name == "admin":
        raise ConfigError(key, "must be 1-64 of a-z, 0-9, '.', '_', '-' (starting with a letter or digit), "
                          "and not 'admin' (the admin token's name)")
    u = users.table(name)
    u.only({"role", "indexes", "credential"})
    role = u.choice("role", CONSOLE_ROLES)
    indexes = u.strings("indexes") or ()
    for i, index in enumerate(indexes):
        if not INDEX_NAME.fullmatch(index):
            raise ConfigError(f"{u.key('indexes')}[{i}]", "is not an index name")
    if role == "owner" and not indexes:
        raise ConfigError(u.key("indexes"), "must name the indexes an owner owns")
    if role != "owner" and indexes:
        raise ConfigError(u.key("indexes"), f"applies to owners only (role is {role!r})")
    credential = u.data.get("credential")
    if not isinstance(credential, str) or not CREDENTIAL_HASH.fullmatch(credential):
        raise ConfigError(u.key("credential"), "must be the credential's hash 'scrypt$N$r$p$SALT$HASH' "
                          "(kbgate users add writes it), never the credential")
    return ConsoleUserConfig(name, role, tuple(indexes), credential)
