"""requirements.lock, the one dependency set every install takes (Makefile, docs/operators.md
"The lock file"): each requirement of pyproject.toml (and of its dev extra) is pinned there to a
release its range admits, every pin carries hashes, and a changed lock reinstalls the venv."""

from __future__ import annotations

import re
import subprocess
import tomllib

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
    assert "--no-deps" in out and "-e ." in out
    assert "venv --clear" in out  # nothing left from an older set
