"""`kbgate onboard` (gateway/onboard.py) against a running 2-worker server, its prompts answered
by this test the way an admin would, following seed 003 "接入流程": the 测试 button sends an
unsigned request first, the key is shown only after saving.
"""

from __future__ import annotations

import os
import queue
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from gateway.config import load_config
from tests.conftest import ROOT
from tests.serving import build_index, config_text, free_port, post, ret, running

CONSOLE_KEY = "console-shown-key-7f3a9c"


class Proc:
    """A subprocess whose stdout lines are read on a thread; `expect` waits for a line."""

    def __init__(self, args: list[str]) -> None:
        self.p = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=os.environ.copy())
        self.seen: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self._q.put(line.rstrip("\n"))

    def expect(self, text: str, timeout: float = 20.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._q.get(timeout=0.2)
            except queue.Empty:
                if self.p.poll() is not None and self._q.empty():
                    break
                continue
            self.seen.append(line)
            if text in line:
                return line
        raise AssertionError(f"{text!r} not printed; output so far:\n" + "\n".join(self.seen))

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()


def test_onboard_flow_against_running_server(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    build_index(tmp_path)
    cfg = tmp_path / "gateway.toml"
    port = free_port()
    # A new tenant before the console shows a key: report mode, no secrets.
    cfg.write_text(config_text(port=port, redis_url=redis_url, prefix=key_prefix, verify="report"))
    with running(cfg, port) as srv, httpx.Client(timeout=5) as c:
        ob = Proc([sys.executable, "-m", "gateway.cli", "onboard", "--config", str(cfg), "--tenant", "acme",
                   "--url", "https://kb.example.com/", "--secret-stdin", "--wait", "30"])
        try:
            assert ob.expect("https://kb.example.com/volcengine/acme").strip() == \
                "https://kb.example.com/volcengine/acme"
            ob.expect("report mode")
            ob.expect("Press 测试")
            # the console's connectivity test: unsigned, answered in report mode
            r = post(c, srv.base, None, query="寻找相关软件信息")
            assert r.status_code == 200 and ret(r) == 0
            ob.expect("FirstLevelId='tech' SecondLevelId='software'")
            ob.expect("signature: unsigned (header_missing)")
            ob.expect("answer: Ret=0 outcome=ok")
            ob.expect("Paste the secret")
            ob.send(CONSOLE_KEY)
            ob.expect("verify = enforce")
            ob.expect("Press 测试 again")
            srv.wait_log("config reloaded", 2)  # key added and enforce, one edit: both workers
            r = post(c, srv.base, CONSOLE_KEY)
            assert ret(r) == 0, r.text
            ob.expect("signature: verified with key")
            ob.expect("Done: the delivery verified")
            assert ob.p.wait(10) == 0
        finally:
            if ob.p.poll() is None:
                ob.p.kill()
        assert CONSOLE_KEY not in "\n".join(ob.seen)
        # the tenant now enforces, with the console's key stored 0600
        tenant = load_config(cfg).tenants["acme"]
        assert tenant.verify == "enforce"
        assert [k.value.reveal() for k in tenant.secrets] == [CONSOLE_KEY]
        key_file = Path(tenant.secrets[0].source[5:])
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert ret(post(c, srv.base, None)) == 40001  # unsigned is now rejected
        assert CONSOLE_KEY not in "\n".join(srv.lines)


def test_onboard_reports_a_wrong_key(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    build_index(tmp_path)
    cfg = tmp_path / "gateway.toml"
    port = free_port()
    cfg.write_text(config_text(port=port, redis_url=redis_url, prefix=key_prefix, verify="report"))
    with running(cfg, port) as srv, httpx.Client(timeout=5) as c:
        ob = Proc([sys.executable, "-m", "gateway.cli", "onboard", "--config", str(cfg), "--tenant", "acme",
                   "--url", "https://kb.example.com", "--secret-stdin", "--wait", "30"])
        try:
            ob.expect("Press 测试")
            post(c, srv.base, None)
            ob.expect("Paste the secret")
            ob.send("a-mistyped-key-000")
            ob.expect("Press 测试 again")
            srv.wait_log("config reloaded", 2)
            assert ret(post(c, srv.base, CONSOLE_KEY)) == 40105
            ob.expect("signature: failed (signature_mismatch)")
            ob.expect("did not verify")
            assert ob.p.wait(10) == 1
        finally:
            if ob.p.poll() is None:
                ob.p.kill()
