"""`kbgate onboard` (gateway/ops/onboard.py) against a running 2-worker server, its prompts answered
by this test the way an admin would, following the 联网问答Agent callback spec "接入流程": the 测试 button sends an
unsigned request first, the key is shown only after saving.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import orjson

from gateway.core.config import load_config
from gateway.ops.deliveries import RedisDeliveryLog
from tests.support.callbacks import post, ret
from tests.support.configs import acme_toml
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

CONSOLE_KEY = "console-shown-key-7f3a9c"


def _default_sigint() -> None:
    """In the child before exec: SIGINT back to its default. A parent that ignores it (`make
    test &`, nohup, a CI runner) passes SIG_IGN on through exec, and Python then installs no
    KeyboardInterrupt handler, so the Ctrl-C tests' SIGINT would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Proc:
    """A subprocess whose stdout lines are read on a thread; `expect` waits for a line. Its
    SIGINT disposition is the default whatever this process's is (`_default_sigint`)."""

    def __init__(self, args: list[str]) -> None:
        self.p = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=os.environ.copy(),
                                  preexec_fn=_default_sigint)
        self.seen: list[str] = []
        self._q: queue.Queue[str] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self._q.put(line.rstrip("\n"))

    def __enter__(self) -> Proc:
        return self

    def __exit__(self, *exc: object) -> None:
        """Kill the process if a failed expectation left it running."""
        if self.p.poll() is None:
            self.p.kill()

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

    def output(self) -> str:
        """Every line printed so far, including those no `expect` read (call after the process ended)."""
        deadline = time.monotonic() + 5
        while self._reader.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        while not self._q.empty():
            self.seen.append(self._q.get())
        return "\n".join(self.seen)

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()


def test_onboard_flow_against_running_server(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = tmp_path / "gateway.toml"
    port = free_port()
    # A new tenant before the console shows a key: report mode, no secrets.
    cfg.write_text(acme_toml(docs_index, port=port, redis_url=redis_url, prefix=key_prefix, verify="report"))
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        with Proc([sys.executable, "-m", "gateway.cli", "onboard", "--config", str(cfg), "--tenant", "acme",
                   "--url", "https://kb.example.com/", "--secret-stdin", "--wait", "30"]) as ob:
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
        assert CONSOLE_KEY not in "\n".join(ob.seen)
        # the tenant now enforces, with the console's key stored 0600
        tenant = load_config(cfg).tenants["acme"]
        assert tenant.verify == "enforce"
        assert [k.value.reveal() for k in tenant.secrets] == [CONSOLE_KEY]
        key_file = Path(tenant.secrets[0].source[5:])
        assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
        assert ret(post(c, srv.base, None)) == 40001  # unsigned is now rejected
        assert CONSOLE_KEY not in srv.logs()


def test_onboard_reports_a_wrong_key(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = tmp_path / "gateway.toml"
    port = free_port()
    cfg.write_text(acme_toml(docs_index, port=port, redis_url=redis_url, prefix=key_prefix, verify="report"))
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        with Proc([sys.executable, "-m", "gateway.cli", "onboard", "--config", str(cfg), "--tenant", "acme",
                   "--url", "https://kb.example.com", "--secret-stdin", "--wait", "30"]) as ob:
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
        # the key was stored before it failed: onboard keeps it (enforce), it does not undo
        assert load_config(cfg).tenants["acme"].verify == "enforce"
        assert "Onboarding stopped before a key was stored" not in ob.output()


# ------------------------------------------------------------------ stopping before the key is stored


def _existing_config(tmp_path: Path, redis_url: str, key_prefix: str, *, expired: bool = False) -> Path:
    """A config whose tenant 'acme' enforces with key k1 (expired when asked), mode 0640."""
    (tmp_path / "k1").write_text("k1-secret-value-0123\n")
    cfg = tmp_path / "gateway.toml"
    text = acme_toml(tmp_path / "indexes", port=free_port(), redis_url=redis_url, prefix=key_prefix,
                     secrets=[("k1", "k1")])
    if expired:
        text = text.replace('value_file = "k1"', 'value_file = "k1"\nnot_after = 2001-01-01T00:00:00Z')
    cfg.write_text(text + "# a comment onboard must keep\n")
    cfg.chmod(0o640)
    return cfg


def _onboard(cfg: Path, tenant: str, *extra: str, wait: str = "1") -> list[str]:
    return [sys.executable, "-m", "gateway.cli", "onboard", "--config", str(cfg), "--tenant", tenant,
            "--url", "http://x", "--secret-stdin", "--wait", wait, *extra]


def test_onboard_timeout_restores_the_config_of_a_new_tenant(tmp_path: Path, redis_url: str,
                                                             key_prefix: str) -> None:
    cfg = _existing_config(tmp_path, redis_url, key_prefix)
    before = cfg.read_bytes()
    out = subprocess.run(_onboard(cfg, "newt", "--route", "tech/software=demo-docs"), cwd=ROOT, input="s",
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Created tenant newt" in out.stdout and "No delivery arrived" in out.stdout
    assert "back exactly as it was before: tenant newt is removed again" in out.stdout
    assert cfg.read_bytes() == before
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640
    assert "newt" not in load_config(cfg).tenants
    # no temp file; the edits' lock file stays
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".gateway.toml")] == [".gateway.toml.lock"]


def test_onboard_ctrl_c_restores_verify_of_an_existing_tenant(tmp_path: Path, redis_url: str,
                                                              key_prefix: str) -> None:
    cfg = _existing_config(tmp_path, redis_url, key_prefix, expired=True)
    before = cfg.read_bytes()
    with Proc(_onboard(cfg, "acme", wait="60")) as ob:
        ob.expect("report mode")  # onboard switched the tenant: no live key
        assert load_config(cfg).tenants["acme"].verify == "report"
        ob.expect("Press 测试")
        ob.p.send_signal(signal.SIGINT)
        ob.expect('back exactly as it was before: tenant acme is back to verify = "enforce"')
        assert ob.p.wait(10) == 130
    assert cfg.read_bytes() == before
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640


def test_onboard_ctrl_c_at_the_secret_prompt_stops_at_once(tmp_path: Path, redis_url: str,
                                                           key_prefix: str) -> None:
    # Under asyncio.run a Ctrl-C only cancelled the main task, which a blocking read of the
    # prompt never noticed: onboard waited for a line the admin would never type.
    cfg = _existing_config(tmp_path, redis_url, key_prefix, expired=True)
    before = cfg.read_bytes()
    with Proc(_onboard(cfg, "acme", wait="60")) as ob:
        ob.expect("Press 测试")
        _deliver(redis_url, key_prefix, "acme")
        ob.expect("Paste the secret")  # stdin stays open, nothing typed
        ob.p.send_signal(signal.SIGINT)
        ob.expect('back exactly as it was before: tenant acme is back to verify = "enforce"')
        assert ob.p.wait(10) == 130
    assert cfg.read_bytes() == before


CTRL_C_TESTS = ("test_onboard_ctrl_c_restores_verify_of_an_existing_tenant",
                "test_onboard_ctrl_c_at_the_secret_prompt_stops_at_once")
UNDER_IGNORED_SIGINT = """
import signal, subprocess, sys
signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `make test &`, nohup and some CI runners do
sys.exit(subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
"""


def test_the_ctrl_c_tests_pass_under_a_parent_that_ignores_sigint() -> None:
    # The ignored SIGINT was inherited by onboard, which then never saw the tests' Ctrl-C.
    done = subprocess.run([sys.executable, "-c", UNDER_IGNORED_SIGINT,
                           *(f"tests/ops/test_onboard.py::{name}" for name in CTRL_C_TESTS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout


def test_onboard_error_before_the_key_restores_the_config(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _existing_config(tmp_path, redis_url, key_prefix)
    before = cfg.read_bytes()
    with Proc(_onboard(cfg, "newt", "--route", "tech/software=demo-docs", wait="30")) as ob:
        ob.expect("Press 测试")
        _deliver(redis_url, key_prefix, "newt")  # the console's test arrives...
        ob.expect("Paste the secret")
        ob.send("")  # ...and the admin pastes nothing: ConfigError, exit 2
        ob.expect("back exactly as it was before: tenant newt is removed again")
        assert ob.p.wait(10) == 2
    assert cfg.read_bytes() == before
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o640


def test_onboard_keeps_the_config_once_the_key_is_stored(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _existing_config(tmp_path, redis_url, key_prefix)
    with Proc(_onboard(cfg, "newt", "--route", "tech/software=demo-docs", wait="5")) as ob:
        ob.expect("Press 测试")
        _deliver(redis_url, key_prefix, "newt")
        ob.expect("Paste the secret")
        ob.send(CONSOLE_KEY)
        ob.expect("verify = enforce")
        ob.expect("No delivery arrived")  # step 4 times out: exit 1, but the key stays
        assert ob.p.wait(10) == 1
    assert "Onboarding stopped before a key was stored" not in ob.output()
    newt = load_config(cfg).tenants["newt"]
    assert newt.verify == "enforce" and [k.value.reveal() for k in newt.secrets] == [CONSOLE_KEY]


def test_onboard_never_overwrites_an_edit_made_meanwhile(tmp_path: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _existing_config(tmp_path, redis_url, key_prefix)
    with Proc(_onboard(cfg, "newt", "--route", "tech/software=demo-docs", wait="3")) as ob:
        ob.expect("Press 测试")
        edited = cfg.read_text() + "# someone else's edit\n"
        cfg.write_text(edited)
        ob.expect("was NOT put back")
        assert ob.p.wait(10) == 1
    assert cfg.read_text() == edited


def _deliver(redis_url: str, key_prefix: str, tenant: str) -> None:
    """Record one unsigned delivery for `tenant` the way a worker of `kbgate serve` does."""

    async def go() -> None:
        log = RedisDeliveryLog(redis_url, key_prefix)
        log.submit({"request_id": "r1", "tenant": tenant, "received_at": time.time(), "outcome": "ok", "ret": 0,
                    "status": 200, "key_id": None, "signature": "unsigned", "signature_reason": "header_missing",
                    "first_level_id": "tech", "second_level_id": "software"})
        await log.close()

    asyncio.run(go())


# ------------------------------------------------------------------ signals, and what cannot be caught

ZERO_SIGNATURE = "0" * 64


def _all_zero(c: httpx.Client, base: str) -> httpx.Response:
    """A callback with well-formed signing headers and an all-zero signature (no key made it)."""
    body = b'{"FirstLevelId":"tech","SecondLevelId":"software","Query":"x","Limit":1}'
    return c.post(f"{base}/volcengine/acme", content=body, headers={
        "Content-Type": "application/json", "X-Content-Timestamp": str(int(time.time())),
        "X-Content-Nonce": os.urandom(8).hex(), "X-Content-Signature": ZERO_SIGNATURE})


def _served_config(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str, port: int) -> Path:
    """Tenant acme enforcing with one key, k1, expired: onboard puts it in report mode."""
    (tmp_path / "k1").write_text("k1-secret-value-0123\n")
    cfg = tmp_path / "gateway.toml"
    text = acme_toml(docs_index, port=port, redis_url=redis_url, prefix=key_prefix, workers=1,
                     secrets=[("k1", "k1")])
    cfg.write_text(text.replace('value_file = "k1"', 'value_file = "k1"\nnot_after = 2001-01-01T00:00:00Z'))
    return cfg


def test_onboard_sighup_sigterm_sigquit_restore_the_config(tmp_path: Path, docs_index: Path, redis_url: str,
                                                           key_prefix: str) -> None:
    # A closed SSH session (SIGHUP) or a `kill` (SIGTERM) ended onboard on the spot: the tenant
    # stayed in report mode, and an all-zero signature got Ret 0 and a document.
    port = free_port()
    cfg = _served_config(tmp_path, docs_index, redis_url, key_prefix, port)
    before = cfg.read_bytes()
    with serve(cfg, port=port, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        assert ret(_all_zero(c, srv.base)) == 40106  # enforcing, its one key expired
        for n, sig in enumerate((signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT)):
            with Proc(_onboard(cfg, "acme", wait="60")) as ob:
                ob.expect("Press 测试")
                srv.wait_log("config reloaded", 2 * n + 1)
                assert ret(_all_zero(c, srv.base)) == 0  # report mode: answered while onboard runs
                ob.p.send_signal(sig)
                ob.expect('back exactly as it was before: tenant acme is back to verify = "enforce"')
                assert ob.p.wait(10) == 128 + sig, sig
            assert cfg.read_bytes() == before, sig.name
            srv.wait_log("config reloaded", 2 * n + 2)
            r = _all_zero(c, srv.base)
            assert ret(r) == 40106 and orjson.loads(r.content)["Result"] == [], sig.name
            assert ret(post(c, srv.base, None)) == 40001, sig.name


def test_onboard_killed_by_sigkill_leaves_a_report_mode_that_ends_by_itself(
        tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    # kill -9 cannot be caught, so nothing restores the file: the report mode onboard wrote carries
    # its own end (report_until), after which the server enforces although the file says "report".
    port = free_port()
    cfg = _served_config(tmp_path, docs_index, redis_url, key_prefix, port)
    with serve(cfg, port=port, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        started = time.time()
        with Proc(_onboard(cfg, "acme", wait="1")) as ob:
            ob.expect("at the latest until")
            killed = time.time()
            ob.p.kill()
            ob.p.wait(10)
        acme = load_config(cfg).tenants["acme"]
        assert acme.verify == "report" and acme.report_until is not None
        # onboard's own wait (1 s), two reload intervals and 5 s slack, rounded up to the second
        assert started + 1 + 2 + 5 < acme.report_until <= killed + 1 + 2.2 + 5 + 1
        srv.wait_log("config reloaded", 1)
        if time.time() < acme.report_until - 0.5:
            assert ret(_all_zero(c, srv.base)) == 0  # still inside onboard's window: answered
            assert httpx.get(f"{srv.base}/readyz").json()["tenants"][0]["mode"] == "report"
        time.sleep(max(0.0, acme.report_until - time.time()) + 0.1)  # seconds, not minutes
        assert "verify = \"report\"" in cfg.read_text()  # nobody edited the file...
        r = _all_zero(c, srv.base)
        assert ret(r) == 40106 and orjson.loads(r.content)["Result"] == []  # ...and the server enforces
        assert ret(post(c, srv.base, None)) == 40001
        tenants = httpx.get(f"{srv.base}/readyz").json()["tenants"]
        assert tenants[0]["tenant"] == "acme" and (tenants[0]["verify"], tenants[0]["mode"]) == ("report", "enforce")
        check = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)],
                               cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert "verify=report ended" in check.stdout and ": enforcing" in check.stdout, check.stdout
        assert "WARNING: tenant acme is in report mode" not in check.stdout
