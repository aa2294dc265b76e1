"""Throwaway `redis-server` / `redis-sentinel` processes on free ports, for the tests that
freeze (SIGSTOP), resume or kill Redis. Never the machine's Redis: every process here is
started by the test, and only its own PID is ever signalled.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import redis

from tests.support.harness import free_port


def require(binary: str) -> str:
    """The path of `binary`, or an AssertionError saying how to get it."""
    exe = shutil.which(binary)
    assert exe is not None, (f"this test needs the {binary} binary (make test installs it: "
                             "tests/ensure-tools.sh)")
    return exe


class RedisProc:
    """One redis-server (or, with `sentinel_conf`, redis-sentinel) process on a free port.

    workdir: its own folder (config, dump). extra: more `--name value` arguments.
    """

    def __init__(self, workdir: Path, *extra: str, sentinel_conf: str | None = None) -> None:
        self.port = free_port()
        self.dir = workdir / f"redis-{self.port}"
        self.dir.mkdir(parents=True)
        if sentinel_conf is not None:
            conf = self.dir / "sentinel.conf"  # sentinel rewrites its config file: must be writable
            conf.write_text(f"port {self.port}\nbind 127.0.0.1\ndir {self.dir}\n{sentinel_conf}", "utf-8")
            self.cmd = [require("redis-sentinel"), str(conf)]
        else:
            self.cmd = [require("redis-server"), "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--dir", str(self.dir), *extra]
        self.proc: subprocess.Popen[bytes] | None = None
        self.frozen = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisProc:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_timeout=0.2, socket_connect_timeout=0.2).ping():
                    return self
            except (redis.RedisError, OSError):
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"{self.cmd[0]} on port {self.port} did not start")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=2, socket_connect_timeout=2)

    def freeze(self) -> None:
        """SIGSTOP: the process keeps its socket (connections are accepted by the kernel and
        commands queue in its buffers) but answers nothing until `thaw`."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """SIGKILL: a node loss, no shutdown of any kind."""
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(5)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        if self.frozen:
            self.thaw()
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
