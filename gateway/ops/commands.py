"""The operators' and admins' subcommands of `kbgate` (registered by gateway/cli.py).

Rationale: docs/design-notes.md, "gateway/ops/commands.py".
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from gateway.core.config import load_config
from gateway.core.errors import ConfigError
from gateway.ops.secrets import add_key, check_key_id, format_rows, list_keys, parse_instant, retire_key

USAGE_UNKNOWN = 3  # `secrets list` exit code: the table was printed, but Redis did not answer


def register(sub: Any) -> None:
    """Add `secrets`, `onboard` and `documents` to the `kbgate` subparsers `sub`."""
    s = sub.add_parser("secrets", help="rotate a tenant's signing keys (add, retire, list)")
    ss = s.add_subparsers(dest="secrets_command")

    a = ss.add_parser("add", help="add a key (given or generated); old keys stay valid")
    a.add_argument("--config", required=True)
    a.add_argument("--tenant", required=True)
    a.add_argument("--id", dest="key_id", help="key id (default: today's UTC date)")
    src = a.add_mutually_exclusive_group()
    src.add_argument("--value-env", help="environment variable holding the value in the SERVER's environment "
                     "(a running server cannot see a new one: restart it with the variable set)")
    src.add_argument("--value-file", help="existing file holding the value (e.g. a mounted Kubernetes secret)")
    src.add_argument("--value-stdin", action="store_true",
                     help="read the value from standard input into secrets/<tenant>-<id> (0600)")
    a.add_argument("--not-after", help="the key stops verifying after WHEN")
    a.set_defaults(func=cmd_secrets_add)

    r = ss.add_parser("retire", help="stop a key verifying: not_after = now (or --at), or --remove")
    r.add_argument("--config", required=True)
    r.add_argument("--tenant", required=True)
    r.add_argument("--id", dest="key_id", required=True)
    how = r.add_mutually_exclusive_group()
    how.add_argument("--at", help="WHEN the key stops verifying (default: now)")
    how.add_argument("--remove", action="store_true", help="delete the key's entry from the config")
    r.add_argument("--force", action="store_true",
                   help="even if the tenant would be left with no key that verifies (the refusal names the key)")
    r.set_defaults(func=cmd_secrets_retire)

    ls = ss.add_parser("list", help="each key with its expiry, last verified time and count (all workers)",
                       epilog=f"exit codes: 0 listed, 2 configuration error, {USAGE_UNKNOWN} replay.redis_url is set "
                       "but Redis did not answer: usage is unknown (the table says so), retire nothing on it")
    ls.add_argument("--config", required=True)
    ls.add_argument("--tenant", required=True)
    ls.set_defaults(func=cmd_secrets_list)

    o = sub.add_parser("onboard", help="walk through the Volcengine console's connect-and-test flow")
    o.add_argument("--config", required=True)
    o.add_argument("--tenant", required=True)
    o.add_argument("--url", required=True, help="public base URL of this gateway, e.g. https://kb.example.com")
    o.add_argument("--route", action="append", default=[], metavar="FIRST/SECOND=INDEX",
                   help="route to create when the tenant is new (repeatable)")
    o.add_argument("--secret-stdin", action="store_true", help="read the console's secret from stdin, no prompt")
    o.add_argument("--wait", type=float, default=600.0, help="seconds to wait for each delivery")
    o.set_defaults(func=cmd_onboard)


def _when(text: str | None, key: str) -> float | None:
    if text is None:
        return None
    if text == "now":
        return time.time()
    try:
        return parse_instant(text)
    except ValueError as exc:
        raise ConfigError(key, str(exc)) from None


def cmd_secrets_add(args: argparse.Namespace) -> int:
    if args.key_id is not None:
        check_key_id(args.key_id, "--id")  # before the secret is read or any file is made
    value = None
    if args.value_stdin:
        value = sys.stdin.readline().strip()
        if not value:
            raise ConfigError("--value-stdin", "read an empty secret")
    env = None
    if args.value_env is not None and args.value_env not in os.environ:
        # The server, not this shell, must have the variable; validate the rest of the edit with
        # a stand-in (never written anywhere) and say that the value itself went unchecked.
        print(f"kbgate: WARNING {args.value_env} is not set in this environment, so its value could not be "
              "checked (non-empty, no whitespace, at least 16 characters)", file=sys.stderr)
        env = {**os.environ, args.value_env: "unchecked-stand-in-value-0000"}
    added = add_key(Path(args.config), args.tenant, now=time.time(), key_id=args.key_id,
                    value_env=args.value_env, value_file=args.value_file, value=value,
                    not_after=_when(args.not_after, "--not-after"), env=env)
    print(f"tenant {args.tenant}: added key {added.key_id} ({added.kind} = {added.ref!r})")
    if added.created_file is not None and value is None:
        print(f"  generated a new secret in {added.created_file} (mode 0600); give it to the sender")
    if added.kind == "value_env":
        print(f"  the server reads {added.ref} from its own environment, which a running server cannot change: "
              f"until its workers are restarted with {added.ref} set, they refuse this config (one log line per "
              "worker) and keep serving the old one, so the new key is not accepted yet")
    print("  the old keys stay valid: retire them once `kbgate secrets list` shows they are no longer used")
    return 0


def cmd_secrets_retire(args: argparse.Namespace) -> int:
    now = time.time()
    at = _when(args.at, "--at")
    done = retire_key(Path(args.config), args.tenant, args.key_id, now=now, at=at, remove=args.remove,
                      force=args.force)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at if at is not None else now))
    what = "removed" if args.remove else f"retired (not_after = {stamp})"
    print(f"tenant {args.tenant}: key {args.key_id} {what}")
    if done.deleted_file is not None:
        print(f"  deleted its secret file {done.deleted_file} (kbgate had written it)")
    if done.kept_file is not None:
        print(f"  left its secret file {done.kept_file} on disk ({done.kept_because}): delete it yourself "
              "once nothing needs it")
    return 0


def cmd_secrets_list(args: argparse.Namespace) -> int:
    config = load_config(args.config, read_secrets=False)  # lists ids and sources, never a value
    now = time.time()
    listing = list_keys(config, args.tenant, now)
    print(format_rows(listing, now))
    if listing.unreachable is not None:
        print(f"kbgate: key usage could not be read from Redis at {listing.unreachable} (replay.redis_url): "
              "LAST VERIFIED and COUNT are unknown, so do not retire a key on this listing", file=sys.stderr)
        return USAGE_UNKNOWN
    return 0


def cmd_onboard(args: argparse.Namespace) -> int:
    from gateway.ops.onboard import Stopped, run_onboard

    try:
        return run_onboard(Path(args.config), args.tenant, args.url, routes=args.route,
                           secret_stdin=args.secret_stdin, wait=args.wait)
    except Stopped as stop:  # SIGHUP, SIGTERM, SIGQUIT: the config is restored, exit as the shell would say
        return 128 + stop.signum
