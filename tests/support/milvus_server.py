"""A real Milvus Lite server (`milvus-lite server`, the dev extra) on a free loopback port, for
the tests of indexes served by Milvus: started and stopped like the throwaway redis-server of
tests/conftest.py, and stoppable and restartable on the same port and data folder (the faults).

Rationale: docs/design-notes.md, "tests/support/milvus_server.py".
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

from gateway.ops.processes import stop
from tests.support.harness import free_port

START_SECONDS = 60.0  # a cold start on a loaded 2-core machine took 3 s; a bound, not a wait


def _exe() -> str:
    found = shutil.which("milvus-lite") or str(Path(sys.executable).with_name("milvus-lite"))
    if not Path(found).exists():
        raise RuntimeError("milvus-lite is not installed: make install (it is in the dev extra)")
    return found


class MilvusLite:
    """One `milvus-lite server` process over `data_dir` on `port` (a free one by default)."""

    def __init__(self, data_dir: Path, port: int | None = None) -> None:
        self.data_dir, self.port = data_dir, port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answers(self) -> bool:
        from pymilvus import MilvusClient

        try:
            c = MilvusClient(self.uri, timeout=2, dedicated=True)
            c.list_collections()
            c.close()
            return True
        except Exception:  # not up yet
            return False

    def start(self) -> MilvusLite:
        """Start the server and wait (up to START_SECONDS) until it answers a call."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.data_dir.parent / f"milvus-{self.port}.log", "ab")  # noqa: SIM115  (the process owns it)
        self.proc = subprocess.Popen([_exe(), "server", "--data-dir", str(self.data_dir), "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"milvus-lite server on port {self.port} exited with {self.proc.returncode}")
            with socket.socket() as s:
                s.settimeout(0.2)
                if s.connect_ex(("127.0.0.1", self.port)) == 0 and self._answers():
                    return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"milvus-lite server on port {self.port} did not answer within {START_SECONDS} s")

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after 10 s; the data folder is kept (a restart finds it)."""
        if self.proc is not None:
            stop(self.proc, grace=10)
        self.proc = None

    def __enter__(self) -> MilvusLite:
        return self.start()

    def __exit__(self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
