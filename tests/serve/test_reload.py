"""Config reload (gateway/serve/reload.py, gateway/serve/master.py): unit checks of the Reloader, then a real
`kbgate serve` with 2 workers and Redis reloading under a load loop that must see no failure.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from gateway.core.config import load_config
from gateway.core.config.edit import write_atomically
from gateway.core.errors import ConfigError
from gateway.core.runtime import Runtime
from gateway.serve.reload import Reloader, load_worker_config, reload_config, set_fallback_config
from tests.support.callbacks import post, ret
from tests.support.configs import acme_toml
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

SECRET = "reload-secret-0001"


def _files(tmp_path: Path, indexes: Path, redis_url: str, key_prefix: str, **kw: object) -> Path:
    (tmp_path / "k1").write_text(SECRET + "\n")
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(indexes, port=free_port(), redis_url=redis_url, prefix=key_prefix,
                             secrets=[("k1", "k1")], **kw))  # type: ignore[arg-type]
    return cfg


def write_atomic(path: Path, text: str) -> None:
    """Replace a config file the way an editor or a deploy tool should (rename over it)."""
    write_atomically(path, text, 0o644)


# ------------------------------------------------------------------ Reloader, in-process


def test_file_change_swaps_config(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    rl = Reloader(rt)
    assert rl.check() is None
    port = rt.config.server.bind.rsplit(":", 1)[1]
    write_atomic(cfg, acme_toml(docs_index, port=int(port), redis_url=redis_url, prefix=key_prefix,
                                secrets=[("k1", "k1")], routes=[("tech", "software"), ("tech", "new")]))
    assert rl.check() == "reloaded"
    assert rt.config.tenants["acme"].route("tech", "new") is not None


def test_bad_config_rejected_names_key_and_old_keeps_serving(
        tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    old = rt.config
    rl = Reloader(rt)
    write_atomic(cfg, cfg.read_text().replace('verify = "enforce"', 'verify = "sometimes"'))
    with caplog.at_level(logging.ERROR, logger="kbgate.reload"):
        assert rl.check() == "rejected"
    assert rt.config is old
    rec = [r for r in caplog.records if r.name == "kbgate.reload"][-1]
    assert rec.key == "tenants.acme.verify"  # type: ignore[attr-defined]
    assert rl.check() is None  # the same bad file is not re-tried every second


def test_a_toml_syntax_error_on_reload_names_the_file(tmp_path: Path, docs_index: Path, redis_url: str,
                                                     key_prefix: str) -> None:
    # /readyz's last_refusal said "Config '<file>' is not valid TOML": which file, it did not say.
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    rl = Reloader(rt)
    write_atomic(cfg, cfg.read_text() + "\n[server\n")
    assert rl.check() == "rejected"
    refusal = rl.config_state()["last_refusal"]
    assert (refusal["key"], refusal["file"]) == ("<file>", str(cfg))
    assert refusal["problem"].startswith(f"Config file '{cfg}' is not valid TOML: ")


def test_restart_only_sections_are_kept(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    old_server = rt.config.server
    write_atomic(cfg, cfg.read_text().replace("workers = 2", "workers = 3"))
    assert Reloader(rt).reload() == "reloaded"
    assert rt.config.server == old_server


def test_rotated_secret_file_is_picked_up(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    rl = Reloader(rt)
    (tmp_path / "k1.new").write_text("rotated-on-disk-0002\n")
    os.replace(tmp_path / "k1.new", tmp_path / "k1")  # how a Kubernetes secret volume swaps files
    assert rl.check() == "reloaded"
    assert rt.config.tenants["acme"].secrets[0].value.reveal() == "rotated-on-disk-0002"


def test_a_secret_file_rotated_to_a_short_key_is_refused(tmp_path: Path, docs_index: Path, redis_url: str,
                                                         key_prefix: str, caplog: pytest.LogCaptureFixture) -> None:
    from gateway.serve.reload import refresh_secrets

    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    rt = Runtime(load_config(cfg))
    old = rt.config
    rl = Reloader(rt)
    (tmp_path / "k1.new").write_text("short-key\n")
    os.replace(tmp_path / "k1.new", tmp_path / "k1")
    with caplog.at_level(logging.ERROR, logger="kbgate.reload"):
        assert rl.check() == "rejected"
    assert rt.config is old
    assert [r.key for r in caplog.records if r.name == "kbgate.reload"] == ["tenants.acme.secrets[0].value_file"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError) as exc:  # the file-only refresh (no config file) applies the same rule
        refresh_secrets(dataclasses.replace(old, source=None))
    assert exc.value.key == "tenants.acme.secrets[0].value_file" and "shorter than 16" in exc.value.message


def test_worker_started_on_a_bad_file_serves_the_masters_config(tmp_path: Path, docs_index: Path, redis_url: str,
                                                                 key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    good = load_config(cfg)
    write_atomic(cfg, cfg.read_text().replace('value_file = "k1"', 'value_file = "gone"'))
    with pytest.raises(ConfigError):
        load_worker_config(cfg)  # no master: no fallback
    set_fallback_config(good)
    try:
        assert load_worker_config(cfg) is good
        # the worker's Reloader shows that start as its last refusal (in /readyz)
        state = Reloader(Runtime(good)).config_state()
        assert state["serving"] == "previous"
        assert (state["last_refusal"]["key"], state["last_refusal"]["trigger"]) == (
            "tenants.acme.secrets[0].value_file", "start")
    finally:
        set_fallback_config(None)
        kb = logging.getLogger("kbgate")  # load_worker_config set up JSON logging: undo it
        kb.handlers.clear()
        kb.propagate = True
        kb.setLevel(logging.NOTSET)


# ------------------------------------------------------------------ a real server under load


class Load:
    """Signed requests in a loop on 4 threads; every answer must be HTTP 200 with Ret 0."""

    def __init__(self, base: str) -> None:
        self.base = base
        self.sent = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(4)]

    def _loop(self, i: int) -> None:
        # Half the threads reuse connections (in flight across the swap), half open new ones.
        headers = {} if i % 2 else {"connection": "close"}
        with httpx.Client(timeout=10, headers=headers) as c:
            while not self._stop.is_set():
                try:
                    r = post(c, self.base, SECRET)
                    if r.status_code != 200 or ret(r) != 0:
                        self.failures.append(f"{r.status_code} {r.text[:200]}")
                except httpx.HTTPError as exc:
                    self.failures.append(repr(exc))
                self.sent += 1

    def __enter__(self) -> Load:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)


def test_sighup_and_file_change_reload_under_load(tmp_path: Path, docs_index: Path,
                                                  redis_url: str, key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    port = int(load_config(cfg).server.bind.rsplit(":", 1)[1])
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, httpx.Client(timeout=5) as c:
        assert ret(post(c, srv.base, SECRET, second="new")) == 40402  # route_unknown before
        with Load(srv.base) as load:
            time.sleep(0.5)
            srv.sighup()
            srv.wait_log("config reloaded", 2)  # both workers, trigger sighup
            time.sleep(0.3)
            write_atomic(cfg, acme_toml(docs_index, port=port, redis_url=redis_url, prefix=key_prefix,
                                          secrets=[("k1", "k1")], routes=[("tech", "software"), ("tech", "new")]))
            srv.wait_log("config reloaded", 4)
            time.sleep(0.5)
        assert load.failures == []
        assert load.sent > 50
        triggers = sorted(r["trigger"] for r in srv.log_records() if r.get("msg") == "config reloaded")
        assert triggers == ["file", "file", "sighup", "sighup"]
        assert {r["pid"] for r in srv.log_records() if r.get("msg") == "config reloaded"}.__len__() == 2
        # the new route answers in every worker (new connections spread over both)
        for _ in range(10):
            with httpx.Client(timeout=5, headers={"connection": "close"}) as fresh:
                r = post(fresh, srv.base, SECRET, second="new")
                assert r.status_code == 200 and ret(r) == 0, r.text


def test_bad_config_rejected_by_running_server(tmp_path: Path, docs_index: Path,
                                               redis_url: str, key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    port = int(load_config(cfg).server.bind.rsplit(":", 1)[1])
    good = cfg.read_text()
    with serve(cfg, port=port, workers=2, cwd=ROOT) as srv, Load(srv.base) as load:
        time.sleep(0.3)
        write_atomic(cfg, good.replace('value_file = "k1"', 'value_file = "missing-file"'))
        rejected = srv.wait_log("config rejected, the running config keeps serving", 2)
        assert {r["key"] for r in rejected} == {"tenants.acme.secrets[0].value_file"}
        srv.sighup()  # a SIGHUP with the same bad file is rejected again, not applied
        srv.wait_log("config rejected, the running config keeps serving", 4)
        time.sleep(0.5)
        load.__exit__()
        assert load.failures == []
        assert load.sent > 20
        assert all(r.get("level") != "critical" for r in srv.log_records())


def test_mcp_path_needs_a_restart_its_lists_do_not(tmp_path: Path, docs_index: Path, redis_url: str,
                                                   key_prefix: str) -> None:
    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    old = load_config(cfg)
    write_atomic(cfg, cfg.read_text() + '\n[mcp]\npath = "/kb/mcp"\nallowed_origins = ["https://chat.example.com"]\n')
    new, restart = reload_config(old)
    assert restart == ["mcp.path"] and new.mcp.path == "/mcp"  # the route serving it was built at start
    assert new.mcp.allowed_origins == ("https://chat.example.com",)


# ------------------------------------------------------------------ a refusal is counted and shown


@pytest.mark.anyio
async def test_a_refused_reload_is_counted_and_shown_in_readyz_as_check_config_says_it(
        tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    # An invalid config on reload was only logged: no metric, nothing in /readyz.
    from asgi_lifespan import LifespanManager

    from gateway.serve.app import create_app
    from tests.support.harness import kbgate

    cfg = _files(tmp_path, docs_index, redis_url, key_prefix)
    app = create_app(load_config(cfg))
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://t") as c:
            assert (await c.get("/readyz")).json()["config"] == {
                "file": str(cfg), "serving": "file", "last_refusal": None}
            write_atomic(cfg, cfg.read_text().replace('verify = "enforce"', 'verify = "sometimes"'))
            # The lifespan's own watcher may have loaded it first (it checks every second); either
            # way the file is loaded once, and counted once.
            assert app.reloader.check() in ("rejected", None)
            r = await c.get("/readyz")
            metrics = (await c.get("/metrics")).text
            write_atomic(cfg, cfg.read_text().replace('verify = "sometimes"', 'verify = "enforce"'))
            assert app.reloader.check() in ("reloaded", None)
            after = (await c.get("/readyz")).json()["config"]
            metrics_after = (await c.get("/metrics")).text
    assert r.status_code == 200  # the running config keeps serving: still ready
    state = r.json()["config"]
    assert state["serving"] == "previous" and state["file"] == str(cfg)
    refusal = state["last_refusal"]
    assert (refusal["key"], refusal["trigger"], refusal["file"]) == ("tenants.acme.verify", "file", str(cfg))
    assert 'kbgate_config_reload_total{outcome="rejected"} 1.0' in metrics
    assert 'kbgate_config_reload_total{outcome="reloaded"} 1.0' in metrics_after
    assert after["serving"] == "file" and after["last_refusal"] == refusal  # the last one stays on show
    # check-config of the same bad file prints the very problem the reload logged and showed
    write_atomic(cfg, cfg.read_text().replace('verify = "enforce"', 'verify = "sometimes"'))
    done = kbgate("check-config", "--config", str(cfg))
    assert done.returncode == 2
    assert done.stderr.splitlines()[0] == f"kbgate: config {cfg} refused: {refusal['problem']}"
