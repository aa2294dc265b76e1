"""requirements.lock, the one dependency set every install takes (Makefile, docs/architecture.md,
"The lock file"): each requirement of pyproject.toml (and of its dev extra) is pinned there to a
release its range admits, every pin carries hashes, and a changed lock reinstalls the venv."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.markers import Marker, default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support.paths import ROOT

LOCK = ROOT / "requirements.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)\s*(?:;\s*([^\\]+?))?\s*\\?$")


def pins() -> dict[str, list[tuple[str, str | None, int]]]:
    """name → [(version, marker or None, how many hashes)] as the lock pins it."""
    out: dict[str, list[tuple[str, str | None, int]]] = {}
    current: list[tuple[str, str | None, int]] | None = None
    for line in LOCK.read_text("utf-8").splitlines():
        m = PIN.match(line)
        if m:
            current = out.setdefault(canonicalize_name(m[1]), [])
            current.append((m[2], m[3], 0))
        elif line.strip().startswith("--hash=sha256:") and current:
            version, marker, n = current[-1]
            current[-1] = (version, marker, n + 1)
    return out


def pinned_here(entries: list[tuple[str, str | None, int]]) -> list[str]:
    """The versions whose marker holds for this interpreter (what `make install` takes here)."""
    env = default_environment()
    return [v for v, marker, _ in entries if marker is None or Marker(marker).evaluate(env)]


def test_every_requirement_of_pyproject_is_pinned_within_its_range() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    locked = pins()
    wrong = []
    for spec in [*project["dependencies"], *project["optional-dependencies"]["dev"]]:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate():
            continue
        here = pinned_here(locked.get(canonicalize_name(req.name), []))
        if len(here) != 1 or not req.specifier.contains(here[0], prereleases=True):
            wrong.append(f"{spec}: {here or 'not pinned'}")
    assert wrong == [], "pyproject.toml and requirements.lock disagree: run `make lock`"


def test_every_pin_has_hashes_and_pip_and_the_build_backend_are_pinned() -> None:
    locked = pins()
    assert {"pip", "setuptools"} <= set(locked)
    unhashed = [name for name, entries in locked.items() for _, _, n in entries if n == 0]
    assert unhashed == []
    assert "make lock" in LOCK.read_text("utf-8").split("\n", 3)[1]  # the header names the update command


def test_a_changed_lock_reinstalls_the_venv_from_it() -> None:
    # make -n -W: what make would run were the lock just changed, without running it
    out = subprocess.run(["make", "-n", "-W", "requirements.lock", "install"], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "--require-hashes -r requirements.lock" in out
    # the lock is the whole set: installed as written, nothing resolved (a release published
    # after the lock was written cannot change or break the install)
    assert "--no-deps --require-hashes -r requirements.lock" in out and "-e ." in out
    assert "venv --clear" in out  # nothing left from an older set


def _newcomer_python() -> str:
    """The interpreter a fresh machine has, outside any venv: its bundled pip makes the venv."""
    base = Path(sys.base_prefix) / "bin" / "python3"
    return str(base if base.exists() else sys.executable)


def test_a_fresh_clone_installs_exactly_the_lock_with_the_interpreters_bundled_pip(tmp_path: Path) -> None:
    # A copy of what a clone holds for `make install`, in a folder of its own (the suite's own venv
    # and egg-info stay untouched), installed the way a newcomer's machine does: `make install`,
    # a venv made by the interpreter, its bundled pip taking the lock from the registry. The install
    # must not resolve anything: a release published after the lock was written must not matter.
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("Makefile", "pyproject.toml", "requirements.lock", "README.md"):
        shutil.copy2(ROOT / name, clone / name)
    for package in ("gateway", "indexes"):
        shutil.copytree(ROOT / package, clone / package, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PIP_"))}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p + "/")
    env["PIP_NO_COMPILE"] = "1"  # what is installed is the question here, not its bytecode
    done = subprocess.run(["make", "install", f"PYTHON={_newcomer_python()}"], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    venv_python = clone / ".venv" / "bin" / "python"
    frozen = subprocess.run([str(venv_python), "-m", "pip", "list", "--format=freeze", "--exclude-editable"],
                            capture_output=True, text=True, check=True).stdout
    installed = {canonicalize_name(n): v for n, v in (line.split("==", 1) for line in frozen.split() if "==" in line)}
    locked = {name: pinned_here(entries) for name, entries in pins().items()}
    # every package in the venv is the lock's own version, pip included
    off_lock = {name: version for name, version in installed.items() if [version] != locked.get(name)}
    assert off_lock == {}
    assert installed["pip"] == locked["pip"][0]
    imported = subprocess.run([str(venv_python), "-c", "import gateway.serve.app, indexes.store; print('ok')"],
                              cwd=tmp_path, capture_output=True, text=True)
    assert imported.stdout.strip() == "ok", imported.stderr[-2000:]
