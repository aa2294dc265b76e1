"""Workers die with their master, and a start never serves beside another server's workers
(rationale: docs/architecture.md, "The master").

Rationale: docs/design-notes.md, "gateway/serve/lifeline.py".
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import logging
import os
import signal
import sys
import threading
import time
from copy import copy
from pathlib import Path
from typing import Any

from hypercorn.config import Config as HypercornConfig

__all__ = ["die_with_master", "port_holders", "port_in_use"]

log = logging.getLogger("kbgate.worker")

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
DEATH_SIGNAL = signal.SIGUSR1  # what the kernel sends a worker whose master died
WATCH_SECONDS = 0.5
EXIT_MARGIN_SECONDS = 2.0


def die_with_master(master_pid: int, shutdown: Any, graceful_timeout: float) -> None:
    """Make this worker stop when the process `master_pid` (its parent) dies (module doc).
    shutdown: the worker's shutdown event (set → hypercorn stops accepting and drains)."""
    orphaned = threading.Event()

    def stop() -> None:
        log.warning("master gone, worker stopping", extra={"pid": os.getpid(), "master_pid": master_pid})
        shutdown.set()
        time.sleep(graceful_timeout + EXIT_MARGIN_SECONDS)
        os._exit(1)  # hypercorn did not return in time: nothing else may keep this worker alive

    def gone(*_: Any) -> None:
        if not orphaned.is_set():
            orphaned.set()
            threading.Thread(target=stop, name="kbgate-orphaned", daemon=True).start()

    def watch() -> None:
        while not orphaned.wait(WATCH_SECONDS):
            if os.getppid() != master_pid:
                gone()

    signal.signal(DEATH_SIGNAL, gone)
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, int(DEATH_SIGNAL), 0, 0, 0)
    if os.getppid() != master_pid:  # died before the signal was asked for
        gone()
    threading.Thread(target=watch, name="kbgate-master-watch", daemon=True).start()


def port_in_use(hc: HypercornConfig) -> str | None:
    """Why `hc.bind` cannot be served alone: another socket listens there (a probe bind without
    SO_REUSEPORT fails), with the holders `port_holders` finds; or None. Other bind errors
    are left to the real bind."""
    probe = copy(hc)
    probe.workers = 1  # hypercorn sets SO_REUSEPORT only for more than one worker
    try:
        sockets = probe.create_sockets()
    except OSError as exc:
        if exc.errno != errno.EADDRINUSE:
            return None
        port = hc.bind[0].rsplit(":", 1)[-1]
        holders = port_holders(int(port)) if port.isdigit() else []
        held = "; ".join(f"pid {pid} ({cmd})" for pid, cmd in holders)
        return (f"{hc.bind[0]} cannot be bound: {hc.bind[0]} is already in use{f' by {held}' if held else ''}: "
                "another server, or workers left by a kbgate serve whose master was killed, listen there; "
                "stop them (kill PID) and start again")
    for sock in (*sockets.secure_sockets, *sockets.insecure_sockets):
        sock.close()
    return None


def port_holders(port: int) -> list[tuple[int, str]]:
    """(pid, command line cut to 80 characters) of the processes with a TCP socket listening
    on `port` (/proc/net/tcp and tcp6; another user's processes only when this one may read
    their /proc entries). [] off Linux."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for row in Path(table).read_text().splitlines()[1:]:
                f = row.split()
                if len(f) > 9 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{f[9]}]")
    found: list[tuple[int, str]] = []
    if not inodes:
        return found
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                found.append((int(proc.name), cmd[:80]))
    return sorted(found)
