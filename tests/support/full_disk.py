"""A real full filesystem for a test: a tmpfs of a few hundred KiB, mounted in a mount namespace
of the command's own (`unshare -m`, as root: the tests run as root here and in CI), seeded
from a folder and filled to the last block, then the command run on it. The test's own view of
the folder is untouched; /proc/PID/root/FOLDER reaches the mounted one while the command runs."""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

__all__ = ["on_full_disk"]


def on_full_disk(folder: Path, argv: Sequence[str], *, seed: Path | None = None, size_kib: int = 512) -> list[str]:
    """argv run with a full tmpfs of `size_kib` KiB mounted on `folder`, holding a copy of `seed`
    (when given) and a file `filler` taking every block left. Fails the test, naming why, when this machine
    cannot make a mount namespace (not root, no unshare)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail("a full filesystem needs root and unshare (a tmpfs in a mount namespace)")
    folder.mkdir(parents=True, exist_ok=True)
    copy = f"cp -a {shlex.quote(str(seed))}/. {shlex.quote(str(folder))}/ && " if seed is not None else ""
    script = (f"mount -t tmpfs -o size={size_kib}k kbgate-full {shlex.quote(str(folder))} && {copy}"
              f"(dd if=/dev/zero of={shlex.quote(str(folder / 'filler'))} bs=1k 2>/dev/null || true) && "
              f"exec {shlex.join(argv)}")
    return ["unshare", "-m", "--propagation", "private", "sh", "-c", script]
