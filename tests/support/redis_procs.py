"""Throwaway `redis-server` / `redis-sentinel` processes on free ports, for the tests that
freeze (SIGSTOP), resume or kill Redis. Never the machine's Redis: every process here is
started by the test, and only its own PID is ever signalled.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import redis

from gateway.ops.processes import stop
from tests.support.harness import free_port


def require(binary: str) -> str:
    """The path of `binary`, or an AssertionError saying how to get it."""
    exe = shutil.which(binary)
    assert exe is not None, (f"this test needs the {binary} binary (make test installs it: "
                             "tests/ensure-tools.sh)")
    return exe


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `check()` every 0.1 s (a Redis error counts as False) until it holds, else an
    AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


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
        stop(self.proc, grace=5)


class RedisClusterProcs:
    """A Redis Cluster of `primaries` primaries, each with one replica: 2 × primaries
    `redis-server` processes (cluster-enabled) on free ports, joined by
    `redis-cli --cluster create … --cluster-replicas 1`.

    node_timeout_ms: `cluster-node-timeout`, the time after which a silent primary is
    failed over (the failover test keeps it low). Every node runs with
    `cluster-require-full-coverage no`, so the other shards answer while one fails over.
    Start with `start()`; `stop()` stops every process started.
    """

    def __init__(self, workdir: Path, primaries: int = 3, node_timeout_ms: int = 1000) -> None:
        self.workdir = workdir
        self.nodes = [
            RedisProc(workdir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                      # the bus port is port + 10000 unless given: a free port above 55535 has none
                      "--cluster-port", str(free_port()),
                      "--cluster-node-timeout", str(node_timeout_ms), "--cluster-require-full-coverage", "no",
                      "--cluster-replica-validity-factor", "0")
            for _ in range(2 * primaries)]

    @property
    def url(self) -> str:
        """`redis+cluster://` naming every node (kbgate's URL form)."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{n.port}" for n in self.nodes)

    def start(self, timeout: float = 20.0) -> RedisClusterProcs:
        try:
            for n in self.nodes:
                n.start()
            create = subprocess.run(
                [require("redis-cli"), "--cluster", "create", *(f"127.0.0.1:{n.port}" for n in self.nodes),
                 "--cluster-replicas", "1", "--cluster-yes"],
                capture_output=True, text=True, timeout=timeout)
            assert create.returncode == 0, create.stdout + create.stderr
            wait_until(lambda: all(self._state(n) == "ok" for n in self.nodes) and self._replicas_linked(),
                            timeout, "cluster_state:ok on every node and every replica in sync")
        except BaseException:
            self.stop()
            raise
        return self

    @staticmethod
    def _state(n: RedisProc) -> str:
        return str(n.client().cluster("INFO").get("cluster_state"))

    def _replicas_linked(self) -> bool:
        roles = [n.client().info("replication") for n in self.nodes]
        replicas = [r for r in roles if r["role"] == "slave"]
        return len(replicas) == len(self.nodes) // 2 and all(r["master_link_status"] == "up" for r in replicas)

    def primaries(self) -> list[RedisProc]:
        """The nodes that are primaries right now."""
        return [n for n in self.nodes if not n.frozen and n.proc is not None and n.proc.poll() is None
                and n.client().info("replication")["role"] == "master"]

    def replica_of(self, primary: RedisProc) -> RedisProc:
        """The node replicating `primary` right now."""
        for n in self.nodes:
            if n is primary or n.proc is None or n.proc.poll() is not None:
                continue
            info = n.client().info("replication")
            if info["role"] == "slave" and int(info["master_port"]) == primary.port:
                return n
        raise AssertionError(f"no replica of the primary on port {primary.port}")

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
