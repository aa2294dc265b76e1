"""gateway/core/config/edit.py: edits of one config file run one at a time (its lock) and refuse
a file that changed since its caller read it (base): adders at once all land, or, holding one
base, one lands and the others are refused; none is lost. Through a real server's two
workers: tests/e2e/test_config_edits.py."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gateway.console.credentials import hash_credential
from gateway.console.users_cli import add_user
from gateway.core.config import edit as edit_module
from gateway.core.config import load_config
from gateway.core.config.edit import ConfigConflict, config_lock, file_digest, lock_path
from tests.support.configs import ADMIN_TOKEN, config, write
from tests.support.threads import at_once

ADDERS = 8
CREDENTIAL = hash_credential("a-credential-of-the-tests")


@pytest.fixture(name="cfg")
def _cfg(tmp_path: Path) -> Path:
    return write(tmp_path / "gateway.toml", config(tmp_path, admin_token=ADMIN_TOKEN))


def _users(cfg: Path) -> set[str]:
    return {u.name for u in load_config(cfg, read_secrets=False).admin.users}


def _adder(cfg: Path, name: str, base: str | None = None) -> Callable[[], Any]:
    return lambda: add_user(cfg, name, "viewer", [], "unused", base=base)


def test_adders_at_once_all_land(cfg: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.console.users_cli.hash_credential", lambda c: CREDENTIAL)  # scrypt: not the point
    for round_ in range(3):
        names = [f"u{round_}-{i}" for i in range(ADDERS)]
        got = at_once([_adder(cfg, n) for n in names])
        assert not [g for g in got if isinstance(g, Exception)]
        assert set(names) <= _users(cfg)  # every edit answered as done is in the file


def test_adders_holding_one_base_one_lands_the_others_are_refused(cfg: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("gateway.console.users_cli.hash_credential", lambda c: CREDENTIAL)
    base = file_digest(cfg)
    before = _users(cfg)
    names = [f"v{i}" for i in range(ADDERS)]
    got = at_once([_adder(cfg, n, base) for n in names])
    landed = {n for n, g in zip(names, got, strict=True) if not isinstance(g, Exception)}
    refused = [g for g in got if isinstance(g, Exception)]
    assert len(landed) == 1 and len(refused) == ADDERS - 1
    assert all(isinstance(r, ConfigConflict) and not r.busy and r.status == 409 for r in refused)
    assert "changed since it was read" in refused[0].message
    assert _users(cfg) == before | landed


def test_a_stale_base_changes_nothing(cfg: Path) -> None:
    base = file_digest(cfg)
    add_user(cfg, "first", "viewer", [], "credential-one", base=base)
    text = cfg.read_bytes()
    with pytest.raises(ConfigConflict):
        add_user(cfg, "second", "viewer", [], "credential-two", base=base)
    assert cfg.read_bytes() == text and "second" not in _users(cfg)
    add_user(cfg, "second", "viewer", [], "credential-two", base=file_digest(cfg))  # read again: it lands
    assert {"first", "second"} <= _users(cfg)


def test_an_edit_waits_for_the_lock_and_is_refused_when_it_stays_held(cfg: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(edit_module, "LOCK_WAIT", 0.3)
    text = cfg.read_bytes()
    fd = os.open(lock_path(cfg), os.O_RDWR | os.O_CREAT, 0o600)  # another process's edit, stuck
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(ConfigConflict) as err:
            add_user(cfg, "late", "viewer", [], "credential-three")
        assert err.value.busy and "is being edited by another process" in err.value.message
        assert cfg.read_bytes() == text
    finally:
        os.close(fd)
    add_user(cfg, "late", "viewer", [], "credential-three")
    assert "late" in _users(cfg)
    assert oct(lock_path(cfg).stat().st_mode & 0o777) == oct(0o600)


def test_the_lock_is_one_for_every_holder(cfg: Path) -> None:
    with config_lock(cfg), pytest.raises(ConfigConflict):
        with config_lock(cfg, wait=0.1):
            pass
