"""`kbgate users add|list|remove`: the console's users in the config file (registered by gateway/cli.py).

Rationale: docs/design-notes.md, "gateway/console/users_cli.py".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import orjson
import tomlkit
from tomlkit.toml_document import TOMLDocument

from gateway.console.changes import audit_change, cli_user
from gateway.console.credentials import MAX_CREDENTIAL, hash_credential, new_credential
from gateway.core.config import Config, load_config, load_indexes_dir
from gateway.core.config.edit import edit_config
from gateway.core.config.owners import CONSOLE_ROLES
from gateway.core.errors import ConfigError
from indexes.errors import IndexStoreError
from indexes.store import IndexStore

MIN_CREDENTIAL = 12  # characters of a credential typed by its owner (a generated one has 43)


def register(sub: Any) -> None:
    """Add `users` and its subcommands to the `kbgate` parser's subparsers `sub`."""
    u = sub.add_parser("users", help="the console's users: add (prints the credential once), list, remove")
    us = u.add_subparsers(dest="users_command", required=True)
    a = us.add_parser("add", help="add a console user with a role; prints their credential once")
    a.add_argument("name")
    a.add_argument("--role", required=True, choices=CONSOLE_ROLES)
    a.add_argument("--index", action="append", default=[], metavar="NAME",
                   help="an index an owner owns (repeat for several; owners only)")
    a.add_argument("--config", required=True, type=Path)
    a.add_argument("--credential-stdin", action="store_true",
                   help=f"read the credential from one line of stdin (at least {MIN_CREDENTIAL} characters) "
                        "instead of generating one")
    a.set_defaults(func=cmd_users_add)
    ls = us.add_parser("list", help="each user with their role and indexes (never a credential)")
    ls.add_argument("--config", required=True, type=Path)
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=cmd_users_list)
    r = us.add_parser("remove", help="remove a console user: their credential stops working at the next reload")
    r.add_argument("name")
    r.add_argument("--config", required=True, type=Path)
    r.set_defaults(func=cmd_users_remove)


def _users_table(doc: TOMLDocument) -> Any:
    admin = doc.get("admin")
    if admin is None:
        admin = tomlkit.table()
        doc["admin"] = admin
    users = admin.get("users")
    if users is None:
        users = tomlkit.table(is_super_table=True)
        admin["users"] = users
    return users


def missing_indexes(path: Path, indexes: list[str]) -> list[str]:
    """The names in `indexes` that are no index under the config's `indexes.dir` (a name no
    index may have included): an owner owns only indexes that exist."""
    store = IndexStore(load_indexes_dir(path))
    missing = []
    for name in indexes:
        try:
            exists = (store.folder(name) / "meta.json").is_file()
        except IndexStoreError:
            exists = False
        if not exists:
            missing.append(name)
    return missing


def owner_only(path: Path) -> None:
    """Make the config file at `path` readable by its owner only (mode 600, or 400 when it was
    not writable) before a credential hash goes in: the edit keeps the file's mode, so the
    hash is never in a file others may read. Raises ConfigError naming the file."""
    try:
        mode = Path(path).stat().st_mode & 0o777
        if mode & 0o077:
            os.chmod(path, (mode & 0o700) | 0o400)
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be made readable by its owner only: {exc.strerror or exc}",
                          file=Path(path)) from None


def add_user(path: Path, name: str, role: str, indexes: list[str], credential: str, *,
             base: str | None = None) -> Config:
    """Write `[admin.users.NAME]` with the hash of `credential`. Raises ConfigError naming the
    key when the user exists, an index named does not exist (`missing_indexes`), or the edited
    config is invalid, ConfigConflict when `base` (the file's SHA-256 as the caller read it) is
    given and the file changed since (the file is then untouched)."""
    if indexes and (missing := missing_indexes(path, indexes)):
        raise ConfigError(f"admin.users.{name}.indexes", f"names {', '.join(repr(m[:64]) for m in missing)}, which "
                                                         "no index is: an owner owns only indexes that exist (check "
                                                         "the name, or create it first: kbgate index create)")
    digest = hash_credential(credential)
    owner_only(path)

    def mutate(doc: TOMLDocument) -> None:
        users = _users_table(doc)
        if name in users:
            raise ConfigError(f"admin.users.{name}", "already exists: remove it first to change it")
        entry = tomlkit.table()
        entry["role"] = role
        if indexes:
            entry["indexes"] = indexes
        entry["credential"] = digest
        users[name] = entry

    return edit_config(path, mutate, base=base)


def remove_user(path: Path, name: str, *, base: str | None = None) -> Config:
    """Remove `[admin.users.NAME]`. Raises ConfigError when there is no such user, ConfigConflict
    as `add_user` does."""
    def mutate(doc: TOMLDocument) -> None:
        admin = doc.get("admin")
        users = admin.get("users") if admin is not None else None
        if users is None or name not in users:
            raise ConfigError(f"admin.users.{name}", "does not exist")
        del users[name]

    return edit_config(path, mutate, base=base)


def cmd_users_add(args: argparse.Namespace) -> int:
    if args.credential_stdin:
        credential = sys.stdin.readline().strip()
        if not MIN_CREDENTIAL <= len(credential) <= MAX_CREDENTIAL or not credential.isprintable() \
                or any(c in credential for c in ":; "):
            raise ConfigError("--credential-stdin", f"must be {MIN_CREDENTIAL}-{MAX_CREDENTIAL} printable "
                              "characters without ':', ';' or spaces")
    else:
        credential = new_credential()
    config = add_user(args.config, args.name, args.role, list(args.index), credential)
    audit_change(config, cli_user(), "users.add", args.name, role=args.role, indexes=list(args.index))
    owns = f" of {', '.join(args.index)}" if args.index else ""
    print(f"console user {args.name} added ({args.role}{owns}); only the credential's hash is in {args.config}")
    if not args.credential_stdin:
        print(f"  credential (shown once, give it to {args.name} through your secret store): {credential}")
    print(f"  log in at /admin/ with user {args.name} and that credential; a tool sends "
          f"'Authorization: Bearer {args.name}:<credential>'")
    return 0


def cmd_users_list(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    users = [{"name": u.name, "role": u.role, "indexes": list(u.indexes)} for u in config.admin.users]
    if args.json:
        sys.stdout.buffer.write(orjson.dumps({"users": users, "admin_token": config.admin.token_sha256 is not None},
                                             option=orjson.OPT_INDENT_2) + b"\n")
        return 0
    if config.admin.token_sha256 is not None:
        print("admin     admin (the admin token)")
    for u in users:
        owns = f" of {', '.join(u['indexes'])}" if u["indexes"] else ""
        print(f"{u['name']:<9} {u['role']}{owns}")
    if not users and config.admin.token_sha256 is None:
        print("no console users and no admin token: /admin/ answers 404")
    return 0


def cmd_users_remove(args: argparse.Namespace) -> int:
    config = remove_user(args.config, args.name)
    audit_change(config, cli_user(), "users.remove", args.name)
    print(f"console user {args.name} removed; their credential stops working when the server reloads the config")
    return 0
