"""Commands that see a folder read-only, as a container sees a volume mounted `:ro`: a read-only
bind mount in a private mount namespace (`unshare --mount`), so the test still writes it.

    subprocess.run(read_only_argv(folder, [sys.executable, "-c", CODE]))

Needs root and util-linux `unshare`; without them the argv builders fail the test, naming why.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

_WRAP = 'set -e; mount --bind {f} {f}; mount -o remount,bind,ro {f}; exec "$@"'


def read_only_argv(folder: Path, argv: Sequence[str], *, user: int | None = None) -> list[str]:
    """`argv` run in a new private mount namespace where `folder` is a read-only bind mount of
    itself. user: a uid (and gid) to run `argv` as, after the mount (setpriv), e.g. the
    image's 10001. Fails the test, naming why, when this machine cannot make the mount
    (`require_read_only_mounts`)."""
    require_read_only_mounts()
    run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] if user is not None else []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            _WRAP.format(f=shlex.quote(str(folder))), "sh", *run_as, *argv]


def mount_problem() -> str | None:
    """Why this machine cannot make a read-only bind mount in a namespace, or None."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return "util-linux unshare and mount are not installed"
    if os.geteuid() != 0:
        return "a read-only bind mount in a mount namespace needs root"
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"], capture_output=True)
    if probe.returncode != 0:
        return f"unshare --mount is refused here: {probe.stderr.decode(errors='replace').strip()}"
    return None


def require_read_only_mounts() -> None:
    """Fails the test (pytest.fail), naming why, when this machine cannot make a read-only bind
    mount in a mount namespace; returns None when it can."""
    problem = mount_problem()
    if problem is not None:
        pytest.fail(f"read-only bind mounts: {problem}")


def is_read_only_inside(folder: Path) -> bool:
    """Does a command wrapped by `read_only_argv` really see `folder` read-only (EROFS)?"""
    code = ("import os,sys\ntry:\n    os.open(sys.argv[1] + '/.probe', os.O_WRONLY | os.O_CREAT)\n"
            "except OSError as e:\n    sys.exit(0 if e.errno == 30 else 1)\nsys.exit(2)")
    return subprocess.run(read_only_argv(folder, [sys.executable, "-c", code, str(folder)])).returncode == 0


def container_argv(argv: Sequence[str], *, read_only: Sequence[Path], tmpfs: Path | None, stage: Path,
                   user: int | None = None) -> list[str]:
    """`argv` run as a container of deploy/compose.yaml's gateway service runs it, as far as a
    mount namespace can: every folder of `read_only` mounted read-only (the indexes volume,
    `:ro`), the root file system read-only (`read_only: true`) but for a tmpfs at `tmpfs` (the
    service's `tmpfs: ["/tmp"]`: give the command TMPDIR=`tmpfs`), and, when `user` is given,
    run as that uid and gid (the image's 10001). This interpreter's installation may lie in a
    folder only root may enter (pyenv under /root): that folder is then covered by a tmpfs
    holding a bind mount of the installation alone, which `stage` (an empty folder) carries
    across. tmpfs None: the root file system stays writable (the compose `indexer` service).
    Nothing outside the namespace changes. Fails the test, naming why, when this machine cannot
    make the mounts (`require_read_only_mounts`)."""
    require_read_only_mounts()
    q = shlex.quote
    steps = ["set -e"]
    for f in read_only:
        steps += [f"mount --bind {q(str(f))} {q(str(f))}", f"mount -o remount,bind,ro {q(str(f))}"]
    base = Path(sys.base_prefix)
    closed = next((p for p in reversed(base.parents) if p != Path("/") and not os.stat(p).st_mode & 0o001), None)
    if user is not None and closed is not None:
        steps += [f"mount --bind {q(str(base))} {q(str(stage))}",
                  f"mount -t tmpfs -o mode=755 tmpfs {q(str(closed))}",
                  f"mkdir -p {q(str(base))}", f"mount --bind {q(str(stage))} {q(str(base))}"]
    if tmpfs is not None:
        steps += ["mount -o remount,bind,ro /", f"mount -t tmpfs -o mode=1777,size=64m tmpfs {q(str(tmpfs))}"]
    steps.append('exec "$@"')
    run_as = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"] if user is not None else []
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", "; ".join(steps), "sh", *run_as, *argv]
