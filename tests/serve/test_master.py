"""gateway/serve/master.py: the master supervises its workers. A real `kbgate serve` with 2
workers loses one to SIGKILL (what the OOM killer sends) and replaces it; workers that die at
start-up again and again stop the gateway with a non-zero exit. The crash-loop rule in-process.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gateway.serve.lifeline import port_holders
from gateway.serve.master import CRASH_LOOP_DEATHS, CRASH_LOOP_EXIT, CrashLoop, describe_exit
from tests.support.callbacks import post, ret
from tests.support.configs import acme_toml
from tests.support.harness import LISTENING, Server, free_port, kbgate, kbgate_argv, serve
from tests.support.paths import ROOT

SECRET = "master-test-secret-0001"
DIED = "worker died, started a replacement"
CRASH_LOOP = "workers keep dying at start-up, stopping the gateway"


def _config(tmp_path: Path, indexes: Path, redis_url: str, key_prefix: str) -> tuple[Path, int]:
    (tmp_path / "k1").write_text(SECRET + "\n")
    port = free_port()
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(indexes, port=port, redis_url=redis_url, prefix=key_prefix, workers=2,
                             secrets=[("k1", "k1")]))
    return cfg, port


def _until(what: str, check: object, srv: Server, timeout: float = 60.0) -> None:
    """Wait until `check()` is true; fail with the server's log otherwise (not a speed check:
    a worker's start-up on a loaded machine takes seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.1)
    raise AssertionError(f"{what}; log:\n{srv.logs()[-4000:]}")


def test_a_killed_worker_is_logged_and_replaced_on_the_same_sockets(tmp_path: Path, docs_index: Path,
                                                                     redis_url: str, key_prefix: str) -> None:
    cfg, port = _config(tmp_path, docs_index, redis_url, key_prefix)
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, \
            httpx.Client(timeout=10, headers={"connection": "close"}) as c:
        before = srv.workers()
        assert len(before) == 2
        victim = before[0]
        os.kill(victim, signal.SIGKILL)
        [died] = srv.wait_log(DIED, 1, timeout=30)
        assert (died["level"], died["pid"], died["signal"], died["exitcode"]) == ("error", victim, "SIGKILL", None)
        assert died["logger"] == "kbgate.master" and died["uptime_seconds"] >= 0
        replacement = died["replacement_pid"]
        _until("the replacement is not listening", lambda: srv.logs().count(LISTENING) >= 3, srv)
        after = srv.workers()
        assert sorted(after) == sorted([before[1], replacement]), (before, after)
        assert srv.proc is not None and srv.proc.poll() is None  # the master still runs
        for _ in range(20):  # a new connection each: whichever worker accepts it answers
            r = post(c, srv.base, SECRET)
            assert r.status_code == 200 and ret(r) == 0, r.text
        assert srv.stop() == 0  # SIGTERM still drains and stops cleanly
    assert not [r for r in srv.log_records() if r.get("level") == "critical"]


# `kbgate serve` with the crash-loop window widened from the shipped 30 s to WINDOW: on a loaded
# machine (a load of 8 on 2 cores) a worker's start-up, and so five deaths in a row, can take
# longer than 30 s, and the loop was then never seen. The window's own rule is checked in-process
# below (test_crash_loop_*); this run checks that a crash loop stops the gateway, with its line.
WINDOW = 600.0
WIDE_WINDOW_SERVE = ("import sys\nimport gateway.serve.master as m\n"
                     f"m.CrashLoop.__init__.__defaults__ = (m.CRASH_LOOP_DEATHS, {WINDOW})\n"
                     "from gateway.cli import main\nsys.exit(main(sys.argv[1:]))")


def test_workers_dying_at_start_up_stop_the_gateway_with_a_clear_line(tmp_path: Path, docs_index: Path,
                                                                     redis_url: str, key_prefix: str) -> None:
    # A folder cleaner removed the metrics folder: every new worker fails at start-up
    # (prometheus-client refuses a PROMETHEUS_MULTIPROC_DIR that is not a folder).
    cfg, port = _config(tmp_path, docs_index, redis_url, key_prefix)
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    argv = [sys.executable, "-c", WIDE_WINDOW_SERVE, *kbgate_argv(cfg, bind=f"127.0.0.1:{port}", workers=2)[3:]]
    srv = Server(argv, port, log_path=tmp_path / "serve.log", workers=2, cwd=ROOT,
                 env={"PROMETHEUS_MULTIPROC_DIR": str(metrics)})
    with srv:
        shutil.rmtree(metrics)
        os.kill(srv.workers()[0], signal.SIGKILL)
        assert srv.proc is not None
        try:  # each death is a worker's start-up: seconds each on a loaded machine
            code = srv.proc.wait(CRASH_LOOP_DEATHS * 60)
        except Exception:
            raise AssertionError(f"the master did not stop; log:\n{srv.logs()[-4000:]}") from None
    assert code == CRASH_LOOP_EXIT
    [stop] = [r for r in srv.log_records() if r.get("msg") == CRASH_LOOP]
    assert (stop["level"], stop["deaths"], stop["window_seconds"]) == ("critical", CRASH_LOOP_DEATHS, WINDOW)
    died = [r for r in srv.log_records() if r.get("msg") == DIED]
    assert len(died) == CRASH_LOOP_DEATHS - 1  # each replaced until the last one completed the loop
    assert died[0]["signal"] == "SIGKILL" and all(d["exitcode"] == 1 for d in died[1:])


def _alive(pid: int) -> bool:
    """Is `pid` a running process (a zombie waiting for its new parent to reap it is not)?"""
    try:
        return " Z " not in Path(f"/proc/{pid}/stat").read_text().split(")", 1)[1][:4]
    except OSError:
        return False


def test_a_master_killed_outright_takes_its_workers_with_it(tmp_path: Path, docs_index: Path, redis_url: str,
                                                           key_prefix: str) -> None:
    cfg, port = _config(tmp_path, docs_index, redis_url, key_prefix)
    with serve(cfg, port=port, workers=2, cwd=ROOT) as old:
        workers = old.workers()
        assert len(workers) == 2 and old.proc is not None
        os.kill(old.proc.pid, signal.SIGKILL)
        old.proc.wait(10)
        # Bounded by graceful_timeout (5 s in this config) plus the exit margin; generous for a loaded machine.
        _until("workers outlived their master", lambda: not any(_alive(p) for p in workers), old, timeout=30)
        assert len(old.wait_log("master gone, worker stopping", 2)) == 2
    assert not port_holders(port)
    with serve(cfg, port=port, workers=2, cwd=ROOT) as new, \
            httpx.Client(timeout=10, headers={"connection": "close"}) as c:
        assert new.proc is not None
        assert {pid for pid, _ in port_holders(port)} <= {new.proc.pid, *new.workers()}
        for _ in range(10):
            r = post(c, new.base, SECRET)
            assert r.status_code == 200 and ret(r) == 0, r.text


def test_a_start_refuses_a_port_another_process_still_listens_on(tmp_path: Path, docs_index: Path,
                                                                redis_url: str, key_prefix: str) -> None:
    # What an orphaned worker of an older kbgate is: a socket listening with SO_REUSEPORT, as
    # hypercorn binds for more than one worker, which a new start could join unasked.
    cfg, port = _config(tmp_path, docs_index, redis_url, key_prefix)
    orphan = subprocess.Popen([sys.executable, "-c", (
        "import socket,sys,time\ns=socket.socket()\ns.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)\n"
        "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        f"s.bind(('127.0.0.1', {port}))\ns.listen()\nprint('up', flush=True)\ntime.sleep(120)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert orphan.stdout is not None and orphan.stdout.readline().strip() == "up"
        started = kbgate("serve", "--config", str(cfg), "--bind", f"127.0.0.1:{port}", "--workers", "2", timeout=180)
        assert started.returncode == 2, started.stderr[-2000:]
        assert f"127.0.0.1:{port} is already in use by pid {orphan.pid} (" in started.stderr, started.stderr
        assert "server.bind" in started.stderr and "Traceback" not in started.stderr
    finally:
        orphan.kill()
        orphan.wait()


def test_port_holders_names_the_listening_process() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert [pid for pid, _ in port_holders(port)] == [os.getpid()]
    assert port_holders(port) == []


# ------------------------------------------------------------------ the rule, in-process


def test_crash_loop_counts_only_young_deaths_within_the_window() -> None:
    loop = CrashLoop(deaths=3, seconds=30.0)
    assert not loop.death(started=0.0, now=29.0)
    assert not loop.death(started=100.0, now=200.0)  # served 100 s: an OOM kill, not a start-up crash
    assert not loop.death(started=40.0, now=45.0)
    assert loop.death(started=50.0, now=55.0)  # 29, 45, 55: three young deaths within 30 s


def test_crash_loop_forgets_deaths_older_than_the_window() -> None:
    loop = CrashLoop(deaths=3, seconds=30.0)
    assert not loop.death(0.0, 1.0)
    assert not loop.death(10.0, 12.0)
    assert not loop.death(35.0, 40.0)  # the death at 1.0 is 39 s old now
    assert loop.death(41.0, 42.0)


@pytest.mark.parametrize(("code", "described"), [
    (-9, (None, "SIGKILL")), (-15, (None, "SIGTERM")), (1, (1, None)), (0, (0, None)), (-200, (-200, None)),
])
def test_describe_exit_names_the_signal(code: int, described: tuple[int | None, str | None]) -> None:
    assert describe_exit(code) == described
