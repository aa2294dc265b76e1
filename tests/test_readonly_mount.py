"""tests/support/readonly_mount.py: a machine that cannot make a mount namespace fails the
read-only tests naming why; it never skips them. Where it can, the folder really is read-only
inside and writable outside."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT
from tests.support.readonly_mount import container_argv, is_read_only_inside, read_only_argv

REFUSED = "unshare: unshare failed: Operation not permitted"


def _refusing_path(tmp_path: Path) -> str:
    """PATH with an `unshare` first that refuses as a container without CAP_SYS_ADMIN does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "unshare"
    fake.write_text(f"#!/bin/sh\necho '{REFUSED}' >&2\nexit 1\n")
    fake.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def test_the_argv_builders_fail_the_test_naming_why_when_unshare_is_refused(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", _refusing_path(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=f"read-only bind mounts: .*{REFUSED}"):
        read_only_argv(tmp_path, ["true"])
    with pytest.raises(pytest.fail.Exception, match=f"read-only bind mounts: .*{REFUSED}"):
        container_argv(["true"], read_only=[tmp_path], tmpfs=None, stage=tmp_path)


def test_a_read_only_test_fails_not_skips_where_unshare_is_refused(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs",
                        "tests/indexes/test_generations.py::test_an_index_folder_mounted_read_only_is_published"],
                       cwd=ROOT, env={**os.environ, "PATH": _refusing_path(tmp_path)}, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "1 failed" in r.stdout and "skipped" not in r.stdout, r.stdout[-2000:]
    assert REFUSED in r.stdout, r.stdout[-2000:]


def test_the_folder_is_read_only_inside_and_writable_outside(tmp_path: Path) -> None:
    assert is_read_only_inside(tmp_path)
    (tmp_path / "outside").write_text("still writable")
    assert (tmp_path / "outside").read_text() == "still writable"
