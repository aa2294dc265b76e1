"""Key rotation and tenant edits on the config file: `kbgate secrets add|retire|list`.

Rationale: docs/design-notes.md, "gateway/ops/secrets.py".
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import os
import secrets as pysecrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import tomlkit
from redis.exceptions import RedisError
from tomlkit.items import Table
from tomlkit.toml_document import TOMLDocument

from gateway.core.config import Config
from gateway.core.config.edit import array_of_tables, edit_config, tenant_table
from gateway.core.config.fields import KEY_ID, read_signing_key
from gateway.core.errors import ConfigError
from gateway.ops.retirement import retirement_problem
from gateway.ops.secret_files import forget, why_not_kbgates, write_secret_file
from gateway.ops.table import table
from gateway.volcengine.keyuse import KeyUse, read_key_usage

SECRETS_DIR = "secrets"  # generated secret files: <config dir>/secrets/<tenant>-<key id>


@dataclass(frozen=True, slots=True)
class AddedKey:
    """The key `add_key` wrote: id, the config entry ('value_env' or 'value_file') and its
    reference, and the secret file it created (None when the value lives elsewhere)."""

    key_id: str
    kind: str
    ref: str
    created_file: Path | None


@dataclass(frozen=True, slots=True)
class RetiredKey:
    """What `retire_key` did: the validated new config, and for a removed key its secret file:
    `deleted_file` when kbgate had written it (gateway/ops/secret_files.py) and deleted it,
    `kept_file` when the entry named another file, which is left on disk, and `kept_because`
    why (e.g. 'its content changed since kbgate wrote it'). All None otherwise."""

    config: Config
    deleted_file: Path | None = None
    kept_file: Path | None = None
    kept_because: str | None = None


@dataclass(frozen=True, slots=True)
class KeyRow:
    """One line of `secrets list`. not_after: unix s or None; live: verifies now;
    usage: counts of every worker (None when usage is not shared: no Redis configured)."""

    key_id: str
    source: str
    not_after: float | None
    live: bool
    usage: KeyUse | None


def check_key_id(key_id: str, key: str) -> None:
    """Raise ConfigError(key, ...) unless `key_id` is a valid key id; touches nothing.

    key_id: 1-64 chars of letters, digits, '_', '.', ':', '-', starting with a letter or digit
    (the rule of `tenants.<t>.secrets[].id` in gateway/core/config.py), and no '..'. Checked before
    any file is made, since the id names the secret file secrets/<tenant>-<id>.
    """
    if not KEY_ID.fullmatch(key_id) or ".." in key_id:
        raise ConfigError(key, f"{key_id!r} is not a key id: use 1-64 letters, digits, '_', '.', ':', '-', "
                          "starting with a letter or digit, without '..'")


def new_key_id(existing: set[str], now: float) -> str:
    """A key id from the UTC date, e.g. '2026-11-02', with '.2', '.3'… when taken that day."""
    base = dt.datetime.fromtimestamp(now, dt.UTC).strftime("%Y-%m-%d")
    kid, n = base, 1
    while kid in existing:
        n += 1
        kid = f"{base}.{n}"
    return kid


def add_key(path: Path, tenant: str, *, now: float, key_id: str | None = None, value_env: str | None = None,
            value_file: str | None = None, value: str | None = None, not_after: float | None = None,
            verify: str | None = None, env: Mapping[str, str] | None = None,
            value_source: str = "--value-stdin", base: str | None = None) -> AddedKey:
    """Append a key to `[[tenants.<tenant>.secrets]]` of the config file at `path`.

    Exactly one source, or none: value_env (an env var name, must be set in `env`, default
    os.environ, where its value is checked), value_file (an existing file, relative to the
    config's folder or absolute), value (the secret text, e.g. pasted from the console) or none
    of them (a generated 256-bit url-safe token). Only the new key's value is read: the other
    keys of the file are not (a value_env of another key this shell lacks stops nothing).
    `value` and generated secrets are written to a new 0600 file `secrets/<tenant>-<id>` next
    to the config. now, not_after: unix seconds.
    verify: also set the tenant's mode in the same atomic edit ('enforce' after onboarding).
    value_source: how the user gave `value`, named when it is refused (empty, whitespace,
    shorter than MIN_SECRET_CHARS): the CLI flag by default, not the secret file the edit
    would have made. base: the config file's SHA-256 as the caller read it (ConfigConflict
    when it changed since). Raises ConfigError (bad value, bad key id, invalid result, id taken,
    file exists, ConfigConflict); nothing is left behind then: no secret file, and no secrets/
    folder when this call made it.
    """
    path = Path(path).resolve()
    if sum(x is not None for x in (value_env, value_file, value)) > 1:
        raise ConfigError(f"tenants.{tenant}.secrets", "takes one of value_env, value_file or a value")
    if value is not None:  # the server's own rule for a signing key, before anything is written
        read_signing_key("env:value", value_source, path.parent, {"value": value})
    if key_id is not None:
        check_key_id(key_id, f"tenants.{tenant}.secrets.id")
    secrets_dir = path.parent / SECRETS_DIR
    made_dir = not secrets_dir.exists()
    created: Path | None = None
    kid = key_id
    kind, ref = "", ""

    def mutate(doc: TOMLDocument) -> None:
        nonlocal kid, created, kind, ref
        t = tenant_table(doc, tenant)
        aot = array_of_tables(t, "secrets")
        taken = {str(s.get("id")) for s in aot}
        kid = kid or new_key_id(taken, now)
        if kid in taken:
            raise ConfigError(f"tenants.{tenant}.secrets", f"already holds key id {kid!r}")
        entry = tomlkit.table()
        entry["id"] = kid
        where = f"tenants.{tenant}.secrets[{len(aot)}]"
        if value_env is not None:  # the new key's value, the only one this edit reads
            kind, ref = "value_env", value_env
            read_signing_key(f"env:{ref}", f"{where}.{kind}", path.parent, os.environ if env is None else env)
        elif value_file is not None:
            kind, ref = "value_file", value_file
            read_signing_key(f"file:{ref}", f"{where}.{kind}", path.parent, {})
        else:
            kind, ref = "value_file", f"{SECRETS_DIR}/{tenant}-{kid}"
            created = write_secret_file(path.parent / ref, value if value is not None else _generate())
        entry[kind] = ref
        if not_after is not None:
            entry["not_after"] = dt.datetime.fromtimestamp(not_after, dt.UTC)
        entry.add(tomlkit.nl())
        aot.append(entry)
        if verify is not None:
            _set_mode(t, verify, None)

    try:
        edit_config(path, mutate, base=base)
    except BaseException:
        if created is not None:
            created.unlink(missing_ok=True)
            forget(created)
        if made_dir:
            with contextlib.suppress(OSError):  # only when empty: another key may have landed meanwhile
                secrets_dir.rmdir()
        raise
    assert kid is not None
    return AddedKey(kid, kind, ref, created)


def retire_key(path: Path, tenant: str, key_id: str, *, now: float, at: float | None = None,
               remove: bool = False, force: bool = False, base: str | None = None) -> RetiredKey:
    """Stop a key verifying: `not_after = at` (unix s; default now), or remove its entry.

    When `remove` drops an entry whose value_file is a file kbgate itself wrote (recorded by
    gateway/ops/secret_files.py when it wrote it, neither replaced nor rewritten since: same
    inode, size, mtime and content digest; named by no other key), that file is deleted after
    the config was written; any other value_file, a hand-made secrets/<tenant>-<id> or one
    rewritten in place included, is left on disk and returned as `kept_file`, with the reason
    in `kept_because`. No secret's value is read. Refuses (ConfigError naming the keys) a
    retirement after which the tenant would have no key that verifies, now or once the other
    keys' own retirements pass (gateway/ops/retirement.py), unless `force`; the rule reads the
    file under the edit's lock, so two retirements at once never both pass on each other's key.
    base: the file's SHA-256 as the caller read it (ConfigConflict when it changed since).
    """
    path = Path(path).resolve()
    when = now if at is None else at
    removed_file: str | None = None
    was: float | None = None

    def mutate(doc: TOMLDocument) -> None:
        nonlocal removed_file, was
        t = tenant_table(doc, tenant)
        aot = array_of_tables(t, "secrets")
        idx = next((i for i, s in enumerate(aot) if s.get("id") == key_id), None)
        if idx is None:
            raise ConfigError(f"tenants.{tenant}.secrets", f"holds no key with id {key_id!r}")
        before = aot[idx].get("not_after")
        was = before.timestamp() if isinstance(before, dt.datetime) else None
        if remove:
            ref = aot[idx].get("value_file")
            removed_file = str(ref) if ref is not None else None
            del aot[idx]
        else:
            aot[idx]["not_after"] = dt.datetime.fromtimestamp(when, dt.UTC).replace(microsecond=0)

    def check(config: Config) -> None:
        others = [k for k in config.tenants[tenant].secrets if k.id != key_id]
        problem = retirement_problem(tenant, key_id, others, when=now if remove else when, was=was, now=now)
        if problem is not None and not force:
            raise ConfigError(f"tenants.{tenant}.secrets", f"not changed: {problem}")

    config = edit_config(path, mutate, check, base=base)
    if removed_file is None:
        return RetiredKey(config)
    fp = Path(os.path.normpath(path.parent / removed_file))  # normpath: never follow a symlink here
    if not os.path.lexists(fp):
        return RetiredKey(config)
    still_named = any(Path(k.source[5:]).resolve() == fp.resolve()
                      for t in config.tenants.values() for k in t.secrets if k.source.startswith("file:"))
    if still_named:
        return RetiredKey(config, kept_file=fp, kept_because="another key still names it")
    why = why_not_kbgates(fp)
    if why is None:
        fp.unlink()
        forget(fp)
        return RetiredKey(config, deleted_file=fp)
    return RetiredKey(config, kept_file=fp, kept_because=why)


def set_verify(path: Path, tenant: str, mode: str, *, until: float | None = None,
               written: Callable[[str], None] | None = None) -> Config:
    """Set `tenants.<tenant>.verify` to 'enforce' (dropping report_until) or 'report' until
    `until` (unix s, required then; kept to the whole second after it). written: as
    `edit_config`'s. Raises ConfigError."""

    def mutate(doc: TOMLDocument) -> None:
        _set_mode(tenant_table(doc, tenant), mode, until)

    return edit_config(path, mutate, written=written)


def _set_mode(t: Table, mode: str, until: float | None) -> None:
    t["verify"] = mode
    if until is not None:
        t["report_until"] = dt.datetime.fromtimestamp(math.ceil(until), dt.UTC)
    elif "report_until" in t:
        del t["report_until"]


def ensure_tenant(path: Path, tenant: str, routes: list[tuple[str, str, str]], *,
                  report_until: float | None = None, written: Callable[[str], None] | None = None) -> Config:
    """Create `[tenants.<tenant>]` in report mode until `report_until` (unix s; required when the
    tenant is new) when absent, and add the missing routes.

    routes: (FirstLevelId, SecondLevelId, index) triples. written: as `edit_config`'s.
    Raises ConfigError.
    """

    def mutate(doc: TOMLDocument) -> None:
        if "tenants" not in doc:
            doc["tenants"] = tomlkit.table(is_super_table=True)
        tenants = doc["tenants"]
        if tenant not in tenants:
            t = tomlkit.table()
            t["path"] = f"/volcengine/{tenant}"
            _set_mode(t, "report", report_until)
            tenants[tenant] = t
        t = tenants[tenant]
        if "routes" not in t:
            t["routes"] = tomlkit.aot()
        have = {(str(r.get("first_level_id")), str(r.get("second_level_id"))) for r in t["routes"]}
        for first, second, index in routes:
            if (first, second) in have:
                continue
            r = tomlkit.table()
            r["first_level_id"], r["second_level_id"], r["index"] = first, second, index
            r.add(tomlkit.nl())
            t["routes"].append(r)

    return edit_config(path, mutate, written=written)


@dataclass(frozen=True, slots=True)
class KeyListing:
    """What `secrets list` shows: the rows, whether usage is shared (replay.redis_url is set),
    and `unreachable`: the Redis URL (credentials removed) when usage could not be read from it,
    so that no column may be taken for "unused". None when Redis answered or is not configured."""

    rows: list[KeyRow]
    shared: bool
    unreachable: str | None = None


UNKNOWN = "unknown (Redis unreachable)"  # the LAST VERIFIED and COUNT cells when Redis did not answer


def list_keys(config: Config, tenant: str, now: float) -> KeyListing:
    """Each key of `tenant` with its expiry and usage across all workers (Redis), in config order.

    Raises ConfigError when the tenant does not exist. When Redis is not configured, usage is
    None (each worker then counts for itself only); when it is configured but does not answer
    (RedisError, OSError, within replay.timeout_seconds), usage is None too and the listing says
    so in `unreachable`: a key still in use must never look unused.
    """
    t = config.tenants.get(tenant)
    if t is None:
        raise ConfigError(f"tenants.{tenant}", "does not exist in this config")
    usage: dict[str, KeyUse] | None = None
    unreachable: str | None = None
    if config.replay.redis_url:
        try:
            usage = read_key_usage(config.replay.redis_url, config.replay.key_prefix, tenant,
                                   [k.id for k in t.secrets], config.replay.timeout_seconds)
        except (RedisError, OSError):
            unreachable = url_without_credentials(config.replay.redis_url)
    rows = [KeyRow(k.id, k.source.split(":", 1)[0] + ":" + _short(k.source), k.not_after, k.live(now),
                   usage.get(k.id) if usage is not None else None) for k in t.secrets]
    return KeyListing(rows, shared=config.replay.redis_url is not None, unreachable=unreachable)


def format_rows(listing: KeyListing, now: float) -> str:
    """The `secrets list` table: id, state, not_after, last verified (age), count, workers, each
    column as wide as its widest cell (gateway/ops/table.py).

    Usage cells read UNKNOWN when Redis did not answer, 'n/a' when usage is not shared."""
    missing = UNKNOWN if listing.unreachable is not None else "n/a"
    rows = []
    for r in listing.rows:
        na = _iso(r.not_after) if r.not_after is not None else "-"
        if r.usage is None:
            last, count, workers = missing, missing, ""
        else:
            last = f"{_iso(r.usage.last)} ({_age(now - r.usage.last)} ago)" if r.usage.last else "never"
            count = str(r.usage.count)
            workers = ", ".join(f"{w}={n}" for w, n in sorted(r.usage.workers.items()))
        rows.append((r.key_id, "live" if r.live else "expired", na, last, count, workers))
    lines = table(("KEY ID", "STATE", "NOT AFTER", "LAST VERIFIED", "COUNT", "WORKERS"), rows, right=frozenset({4}))
    if not listing.shared:
        lines.append("(usage is kept per worker without replay.redis_url; see /metrics of each worker)")
    return "\n".join(lines)


def url_without_credentials(url: str) -> str:
    """`url` (a replay.redis_url) with any user:password@ and any ?query (where redis-py also
    takes a password) removed, for messages: 'redis://:pw@h:6379/0?x=1' → 'redis://h:6379/0'."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "(a Redis URL kbgate cannot parse)"
    netloc, slash, path = rest.partition("/")
    return f"{scheme}://{netloc.rpartition('@')[2]}{slash}{path.partition('?')[0]}"


def parse_instant(text: str) -> float:
    """'now', unix seconds, or an ISO 8601 date-time with offset ('2026-12-31T00:00:00Z') → unix s.

    Raises ValueError naming the accepted forms.
    """
    if text.isdigit():
        return float(text)
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("use unix seconds or a date-time with offset, e.g. 2026-12-31T00:00:00Z") from None
    if when.tzinfo is None:
        raise ValueError("the date-time needs an offset, e.g. 2026-12-31T00:00:00Z")
    return when.timestamp()


# ---------------------------------------------------------------- helpers


def _generate() -> str:
    return pysecrets.token_urlsafe(32)


def _short(source: str) -> str:
    ref = source.split(":", 1)[1] if ":" in source else source
    return Path(ref).name if source.startswith("file:") else ref


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _age(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 120:
        return f"{s} s"
    if s < 7200:
        return f"{s // 60} min"
    if s < 172800:
        return f"{s // 3600} h"
    return f"{s // 86400} d"
