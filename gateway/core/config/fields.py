"""Reading config values: the typed getters of `gateway.core.validate` raising `ConfigError`,
and the readers only a config needs (secrets from env/files, instants, path globs, names).

Every problem names the key ("Config 'tenants.acme.secrets[0].value_env' names ACME_SECRET,
which is not set."); no message ever holds a secret's value.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gateway.core.config.model import MIN_SECRET_CHARS
from gateway.core.errors import ConfigError
from gateway.core.types import Secret
from gateway.core.validate import Fields, Problem
from indexes.filters import glob_problem

TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
INDEX_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
ROUTE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}")
SHA256_HEX = re.compile(r"[0-9a-f]{64}")
WHITESPACE = re.compile(r"\s")


def config_invalid(p: Problem) -> ConfigError:
    """The error factory of config reads: ConfigError(key, problem)."""
    if p.kind == "unknown":
        return ConfigError(p.key, "is not a known key (a typo?)")
    return ConfigError(p.key, p.text)


def section(data: Mapping[str, Any], at: str = "") -> Fields:
    """Fields over a TOML table at dotted path `at`, raising ConfigError."""
    return Fields(data, at, config_invalid, noun="a table")


def table_of(value: Any, key: str) -> Fields:
    """Fields over an entry of an array of tables (or a named sub-table) at `key`."""
    if not isinstance(value, dict):
        raise ConfigError(key, "must be a table")
    return section(value, key)


def globs(f: Fields, name: str) -> tuple[str, ...] | None:
    """`f.strings(name)`, where every glob must work as a path filter (indexes.search.glob_problem)."""
    found = f.strings(name)
    for i, g in enumerate(found or ()):
        problem = glob_problem(g)
        if problem:
            raise ConfigError(f"{f.key(name)}[{i}]", problem)
    return found


def named(f: Fields, name: str, pattern: re.Pattern[str], rule: str) -> str:
    """A required string matching `pattern`; `rule` says what it may hold."""
    value = f.string(name)
    if not pattern.fullmatch(value):
        raise ConfigError(f.key(name), rule)
    return value


class SecretsUnread(dict[str, str]):
    """The `env` of a load that reads no secret (`load_config(read_secrets=False)`: commands such
    as `kbgate secrets list` that need no secret's value): empty, and `read_secret` answers every
    reference, env or file, with an `UnreadSecret` instead of reading it."""


class UnreadSecret(Secret):
    """A secret a config names but a load with SecretsUnread did not read: its value is unknown
    (`reveal` raises RuntimeError); two compare equal when they name the same source."""

    __slots__ = ()

    def __init__(self, source: str) -> None:
        super().__init__(f"\0unread {source}")

    def reveal(self) -> str:
        raise RuntimeError("this config was loaded without reading its secrets")


def shorter_than(secret: Secret, chars: int) -> bool:
    """True when `secret` has fewer than `chars` characters; never for an UnreadSecret (unknown)."""
    return not isinstance(secret, UnreadSecret) and len(secret.reveal()) < chars


def read_secret(source: str, key: str, base_dir: Path, env: Mapping[str, str]) -> Secret:
    """Read a secret from 'env:NAME' or 'file:PATH'; validate it (non-empty, no whitespace).

    A single trailing newline of a file is dropped (files written by `echo`). A relative
    PATH is read from `base_dir`. With env a SecretsUnread, nothing is read: an UnreadSecret.
    Raises ConfigError naming `key`; the message never contains the value.
    """
    if isinstance(env, SecretsUnread):
        return UnreadSecret(source)
    kind, _, ref = source.partition(":")
    if kind == "env":
        if ref not in env:
            raise ConfigError(key, f"names {ref}, which is not set")
        value = env[ref]
    else:
        fp = Path(ref) if Path(ref).is_absolute() else base_dir / ref
        try:
            value = fp.read_text("utf-8")
        except FileNotFoundError:
            raise ConfigError(key, f"names file {ref}, which does not exist") from None
        except (OSError, UnicodeDecodeError):
            raise ConfigError(key, f"names file {ref}, which cannot be read as UTF-8") from None
        if value.endswith("\r\n"):
            value = value[:-2]
        elif value.endswith("\n"):
            value = value[:-1]
    if not value:
        raise ConfigError(key, "gives an empty secret")
    if WHITESPACE.search(value):
        raise ConfigError(key, "gives a secret containing whitespace")
    return Secret(value)


def read_signing_key(source: str, key: str, base_dir: Path, env: Mapping[str, str]) -> Secret:
    """A tenant's HMAC signing key: `read_secret`, then at least MIN_SECRET_CHARS characters.

    Raises ConfigError naming `key` (never the value, nor its length).
    """
    value = read_secret(source, key, base_dir, env)
    if shorter_than(value, MIN_SECRET_CHARS):
        raise ConfigError(key, f"gives a signing key shorter than {MIN_SECRET_CHARS} characters; use a longer one "
                          "(`kbgate secrets add` generates 43)")
    return value


def secret_ref(f: Fields, env_key: str, file_key: str, *, required: bool) -> tuple[str, str] | None:
    """The one source of a secret named by `env_key` or `file_key` of table `f`:
    ('env:NAME' | 'file:PATH', the key it came from), or None when neither is given and not
    `required`. Raises ConfigError when both, or (required) neither, are given."""
    has_env, has_file = env_key in f, file_key in f
    if has_env and has_file or (required and not has_env and not has_file):
        raise ConfigError(f.at, f"needs exactly one of {env_key} or {file_key}" if required
                          else f"needs at most one of {env_key} or {file_key}")
    if not has_env and not has_file:
        return None
    name = env_key if has_env else file_key
    return ("env:" if has_env else "file:") + f.string(name), f.key(name)


def instant(v: Any, key: str) -> float | None:
    """TOML offset date-time, date, or unix seconds → unix seconds; None stays None.

    A date means its midnight UTC. Raises ConfigError for a date-time without offset or
    any other type.
    """
    if v is None:
        return None
    if isinstance(v, bool):
        raise ConfigError(key, "must be a date-time (2026-12-31T00:00:00Z) or unix seconds")
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, dt.datetime):
        if v.tzinfo is None:
            raise ConfigError(key, "needs a UTC offset, e.g. 2026-12-31T00:00:00Z")
        return v.timestamp()
    if isinstance(v, dt.date):
        return dt.datetime(v.year, v.month, v.day, tzinfo=dt.UTC).timestamp()
    raise ConfigError(key, "must be a date-time (2026-12-31T00:00:00Z) or unix seconds")


def relevance_floor(f: Fields, name: str = "relevance_floor") -> float | None:
    """A route's optional relevance floor: a number from 0 to 1, or None when absent (the route
    then uses search.relevance_floor). Raises ConfigError naming the key."""
    if f.data.get(name) is None:
        return None
    return f.number(name, 0.0, lo=0.0, hi=1.0)
