"""`kbgate onboard`: connect a Volcengine knowledge base, following the console's own order.

Rationale: docs/design-notes.md, "gateway/ops/onboard.py".
"""

from __future__ import annotations

import getpass
import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.core.config import load_config
from gateway.core.config.edit import RELOAD_INTERVAL as INTERVAL
from gateway.core.config.edit import config_lock, write_atomically
from gateway.core.errors import ConfigError, DependencyUnavailable
from gateway.ops.deliveries import DeliveryReader
from gateway.ops.probe import ADVICE
from gateway.ops.secrets import add_key, ensure_tenant, set_verify

POLL = 0.3  # seconds between two reads of the deliveries record
REPORT_SLACK = 5.0  # seconds report mode outlasts onboard's own wait for the test delivery
STOPPING = (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)  # each restores the config


class Stopped(BaseException):
    """A stopping signal but SIGINT arrived (SIGHUP, SIGTERM, SIGQUIT): unwinds like a Ctrl-C.
    signum: the signal's number; `kbgate onboard` exits 128 + signum."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass(slots=True)
class _Edits:
    """What onboard did to the config file: its text and mode before, the text of onboard's last
    edit (None: nothing changed yet), what undoing means in words ("tenant newt is removed
    again"), and whether the key is stored (then nothing is undone)."""

    before: str
    mode: int
    written: str | None = None
    undoes: str = ""
    key_stored: bool = False

    def wrote(self, text: str) -> None:
        """The text of onboard's edit, as the edit wrote it (under the config's lock)."""
        self.written = text


def run_onboard(path: Path, tenant: str, base_url: str, *, routes: list[str], secret_stdin: bool,
                wait: float) -> int:
    """Run the four steps above; returns 0 when the signed delivery verified, else 1.

    routes: 'FIRST/SECOND=INDEX' strings, used only when the tenant does not exist yet.
    wait: seconds to wait for each delivery. Raises ConfigError (exit 2) for a missing tenant
    without --route, a config without replay.redis_url (the record must be shared with the
    server), an empty secret or an invalid edit; KeyboardInterrupt on Ctrl-C. Whenever it
    returns 1 or raises before the key is stored, the config file is first restored to its
    text and mode from before onboard (see `_undo`); SIGHUP, SIGTERM and SIGQUIT then raise
    `Stopped` (a BaseException; `kbgate onboard` exits 128 + its signum).
    """
    path = Path(path).resolve()
    try:
        edits = _Edits(path.read_text("utf-8"), path.stat().st_mode & 0o777)
    except OSError as exc:
        raise ConfigError("<file>", f"cannot be read: {exc.strerror or exc}", file=path) from None
    except UnicodeDecodeError:
        raise ConfigError("<file>", "cannot be read as UTF-8", file=path) from None
    with _stopping_raises():
        try:
            code = _onboard(path, tenant, base_url, routes, secret_stdin, wait, edits)
        except BaseException:
            _undo(path, tenant, edits)
            raise
        if code != 0:
            _undo(path, tenant, edits)
        return code


def _raise_stopped(signum: int, frame: object) -> None:
    raise Stopped(signum)


@contextmanager
def _stopping_raises() -> Iterator[None]:
    """While the block runs, SIGHUP, SIGTERM and SIGQUIT raise `Stopped` (their default would end
    the process on the spot, the config left in report mode); SIGINT keeps Python's own
    KeyboardInterrupt. Main thread only; the previous handlers come back after."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _raise_stopped) for sig in STOPPING if sig != signal.SIGINT}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextmanager
def _whole() -> Iterator[None]:
    """Hold the stopping signals (STOPPING) back until the block ends, then raise what the first
    one raises (KeyboardInterrupt, `Stopped`): a config edit and the key file beside it are made
    whole or not at all. Only in the main thread (where Python runs signal handlers); elsewhere
    the block runs as is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: held.append(signum)) for sig in STOPPING}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
    if held:
        raise KeyboardInterrupt if held[0] == signal.SIGINT else Stopped(held[0])


def _undo(path: Path, tenant: str, edits: _Edits) -> None:
    """Put the config back as it was before onboard, unless the key is stored or nothing changed.

    Restores only when the file still holds onboard's own last edit: an edit someone made
    meanwhile is never overwritten (onboard says what to check instead). Never raises an
    OSError; a failed write is reported. A second Ctrl-C waits until the restore is done.
    """
    if edits.key_stored or edits.written is None:
        return
    with _whole():
        _restore(path, tenant, edits)


def _restore(path: Path, tenant: str, edits: _Edits) -> None:
    try:
        with config_lock(path):  # the comparison and the write, with no other edit in between
            try:
                now = path.read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                now = None
            if now != edits.written:
                _tell(f"\nOnboarding stopped before a key was stored, and {path} was changed by someone else "
                      f"meanwhile, so it was NOT put back. Check [tenants.{tenant}]: verify = \"report\" answers "
                      "unsigned requests.")
                return
            write_atomically(path, edits.before, edits.mode)
    except ConfigError as exc:
        _tell(f"\nOnboarding stopped before a key was stored, and {path} could not be put back ({exc.message}). "
              f"Check [tenants.{tenant}]: verify = \"report\" answers unsigned requests.")
        return
    except OSError as exc:
        _tell(f"\nOnboarding stopped before a key was stored, and {path} could not be put back ({exc}). "
            f"Check [tenants.{tenant}]: verify = \"report\" answers unsigned requests.")
        return
    _tell(f"\nOnboarding stopped before a key was stored, so {path} is back exactly as it was before: "
        f"{edits.undoes}. Run `kbgate onboard` again to connect the tenant.")


def _onboard(path: Path, tenant: str, base_url: str, routes: list[str], secret_stdin: bool,
             wait: float, edits: _Edits) -> int:
    config = load_config(path, read_secrets=False)  # ids and expiries only: no value is needed
    now = time.time()
    until = now + 2 * INTERVAL + 0.2 + wait + REPORT_SLACK  # the end of the wait for the test delivery
    if not config.replay.redis_url:
        raise ConfigError("replay.redis_url", "is not set: onboard reads the deliveries record the server "
                          "keeps in Redis (without Redis, watch the server's log lines instead)")
    if tenant not in config.tenants:
        if not routes:
            raise ConfigError(f"tenants.{tenant}", "does not exist; pass --route FIRST/SECOND=INDEX to create it")
        with _whole():
            config = ensure_tenant(path, tenant, [_route(r) for r in routes], report_until=until,
                                   written=edits.wrote)
        edits.undoes = f"tenant {tenant} is removed again, so nothing answers unsigned requests for it"
        say(f"Created tenant {tenant} in {path} (verify = report) with {len(routes)} route(s).")
    t = config.tenants[tenant]
    say(f"Step 1. In 联网问答Agent控制台 → 知识库配置 → 路径导入, enter the request path:\n\n    "
        f"{base_url.rstrip('/')}{t.path}\n")
    for r in t.routes:
        say(f"    FirstLevelId = {r.first_level_id!r}  SecondLevelId = {r.second_level_id!r}  → index {r.index}")
    if not any(k.live(now) for k in t.secrets) and t.mode(now) != "report":
        with _whole():
            config = set_verify(path, tenant, "report", until=until, written=edits.wrote)
        edits.undoes = f"tenant {tenant} is back to verify = \"{t.verify}\" and rejects unsigned requests"
    t = config.tenants[tenant]
    if t.mode(now) == "report" and t.report_until is not None:
        end = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t.report_until))
        say(f"Tenant {tenant} is in report mode: unsigned requests are answered (and recorded) until the "
            f"key is known, and at the latest until {end} (report_until), when it enforces by itself.")
    assert config.replay.redis_url is not None
    log = DeliveryReader(config.replay.redis_url, config.replay.key_prefix, config.replay.timeout_seconds)
    try:
        time.sleep(2 * INTERVAL + 0.2)  # the running server picks the edits up
        say("\nStep 2. Press 测试 under 请求路径调试 in the console now. Waiting for the test delivery...")
        first = _next_delivery(log, tenant, since=now, wait=wait)
        if first is None:
            say(f"No delivery arrived within {wait:.0f} s. Check the URL in the console and that "
                "`kbgate serve` is reachable from the internet (e.g. kbgate probe).")
            return 1
        show(first)
        say("\nStep 3. Save the configuration in the console, open 知识库配置 again and copy the 鉴权密钥 "
            "it shows.")
        secret = _read_secret(secret_stdin)
        # One atomic edit: a worker never serves "enforce" without the key, or the key in report mode.
        with _whole():
            added = add_key(path, tenant, now=time.time(), value=secret, verify="enforce", value_source="secret")
            edits.key_stored = True
        say(f"Stored the key as {added.key_id} in {added.created_file} (mode 0600); tenant {tenant} is now "
            "verify = enforce.")
        time.sleep(2 * INTERVAL + 0.2)
        mark = time.time()
        say("\nStep 4. Press 测试 again (or ask the agent a question). Waiting for a signed delivery...")
        second = _next_delivery(log, tenant, since=mark, wait=wait)
        if second is None:
            say(f"No delivery arrived within {wait:.0f} s; run `kbgate onboard` again or check the log.")
            return 1
        show(second)
        if second.get("signature") == "verified" and second.get("outcome") == "ok":
            say(f"\nDone: the delivery verified with key {second.get('key_id')} and was answered with Ret 0.")
            return 0
        say("\nThe delivery did not verify. The key pasted and the console's key differ: run "
            f"`kbgate secrets add --tenant {tenant} --value-stdin` with the right one, or set "
            "verify = \"report\" again while you check.")
        return 1
    finally:
        log.close()


def _next_delivery(log: DeliveryReader, tenant: str, *, since: float, wait: float) -> dict[str, Any] | None:
    """The oldest delivery of `tenant` received at or after `since` (unix s), waiting up to `wait` s."""
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline:
        try:
            recent = log.recent(tenant, 20)
        except DependencyUnavailable:
            recent = []
        fresh = [r for r in recent if float(r.get("received_at") or 0) >= since]
        if fresh:
            return min(fresh, key=lambda r: float(r["received_at"]))
        time.sleep(POLL)
    return None


def show(rec: dict[str, Any]) -> None:
    """Print one delivery record the way an admin reads it (never a secret: records hold none)."""
    when = time.strftime("%H:%M:%S", time.localtime(float(rec.get("received_at") or 0)))
    say(f"  arrived {when}: FirstLevelId={rec.get('first_level_id')!r} SecondLevelId={rec.get('second_level_id')!r}")
    if "query" in rec:
        say(f"  Query: {rec['query']!r}")
    sig = rec.get("signature")
    reason = rec.get("signature_reason")
    extra = f" ({reason})" if reason else ""
    key = f" with key {rec.get('key_id')}" if rec.get("key_id") else ""
    skew = rec.get("skew_seconds")
    say(f"  signature: {sig}{extra}{key}" + (f", clock skew {skew:+.0f} s" if skew is not None else ""))
    outcome = rec.get("outcome")
    say(f"  answer: Ret={rec.get('ret')} outcome={outcome} results={rec.get('results')}")
    if outcome != "ok" and outcome in ADVICE:
        say(f"  what to do: {ADVICE[outcome]}")


def say(text: str) -> None:
    print(text, flush=True)


def _tell(text: str) -> None:
    """`say`, for the restore: a terminal gone with its SSH session (EIO, EPIPE) must not stop it."""
    try:
        say(text)
    except OSError:
        pass


def _read_secret(from_stdin: bool) -> str:
    if from_stdin or not sys.stdin.isatty():
        say("Paste the secret (one line on stdin):")
        value = sys.stdin.readline().strip()
    else:
        value = getpass.getpass("Paste the secret (not echoed): ").strip()
    if not value:
        raise ConfigError("secret", "is empty: nothing was stored")
    return value


def _route(text: str) -> tuple[str, str, str]:
    ids, sep, index = text.partition("=")
    first, slash, second = ids.partition("/")
    if not sep or not slash or not first or not second or not index:
        raise ConfigError("--route", f"{text!r} is not FIRST/SECOND=INDEX")
    return first, second, index


__all__ = ["Stopped", "run_onboard", "show"]
