"""The shipped deployment layout end to end (deploy/compose.yaml's config and commands): index
as user 10001, then serve with the indexes folder and the root file system read-only; callbacks
answer, a re-index reaches the gateway, a write from inside is refused naming the folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import yaml

from tests.support.callbacks import post, ret
from tests.support.configs import text
from tests.support.harness import Server, free_port
from tests.support.paths import ROOT
from tests.support.polling import until
from tests.support.readonly_mount import container_argv, require_read_only_mounts

USER = 10001  # deploy/Dockerfile's kbgate user, the compose services' `user`
SECRET = "compose-secret-Xr7bN2qL9vK4"


def shipped() -> dict[str, Any]:
    """deploy/compose.yaml, parsed."""
    loaded: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text("utf-8"))
    return loaded


@pytest.fixture(name="box")
def _box(redis_url: str, key_prefix: str) -> Iterator[Path]:
    """A folder user 10001 may enter (pytest's tmp_path lies under a folder only root may enter),
    holding the shipped config with this machine's addresses, its secret file and the demo
    documents; removed afterwards. Fails first, naming why, on a machine that cannot make the
    container's mounts."""
    require_read_only_mounts()
    box = Path(tempfile.mkdtemp(prefix="kbgate-deploy-"))
    try:
        box.chmod(0o755)
        compose = shipped()
        cfg = tomllib.loads(compose["configs"]["gateway_toml"]["content"])
        port = free_port()
        cfg["server"]["bind"] = f"127.0.0.1:{port}"
        cfg["replay"].update(redis_url=redis_url, key_prefix=key_prefix)
        cfg["indexes"]["dir"] = str(box / "indexes")
        cfg["tenants"]["acme"]["secrets"][0]["value_file"] = str(box / "acme_secret")
        (box / "gateway.toml").write_text(text(cfg), "utf-8")
        (box / "acme_secret").write_text(SECRET + "\n")
        shutil.copytree(ROOT / "deploy" / "demo" / "docs", box / "docs")
        for sub in ("indexes", "tmpfs", "stage"):
            (box / sub).mkdir()
        for p in (box, *box.rglob("*")):
            os.chown(p, USER, USER)
        (box / "acme_secret").chmod(0o400)
        yield box
    finally:
        shutil.rmtree(box, ignore_errors=True)


def indexer(box: Path) -> list[str]:
    """The compose `indexer` service's command, with this box's config and documents, as the
    image's user (its folders writable)."""
    command = [str(box / "gateway.toml") if a == "/etc/kbgate/gateway.toml" else str(box / "docs") if a == "/docs"
               else a for a in shipped()["services"]["indexer"]["command"]]
    return container_argv([sys.executable, "-m", "gateway.cli", *command], read_only=[], tmpfs=None,
                          stage=box / "stage", user=USER)


def gateway(box: Path, *extra: str) -> list[str]:
    """The compose `gateway` service's command, in its container's mounts (module doc)."""
    command = [str(box / "gateway.toml") if a == "/etc/kbgate/gateway.toml" else a
               for a in shipped()["services"]["gateway"]["command"]]
    return container_argv([sys.executable, "-m", "gateway.cli", *(extra or command)], read_only=[box / "indexes"],
                          tmpfs=box / "tmpfs", stage=box / "stage", user=USER)


def run(argv: list[str], box: Path) -> tuple[int, str]:
    """Run `argv` with the container's TMPDIR; (exit code, stdout and stderr)."""
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env={**os.environ, "TMPDIR": str(box / "tmpfs"), "PYTHONDONTWRITEBYTECODE": "1"})
    return done.returncode, done.stdout + done.stderr


def test_the_compose_layout_serves_signed_callbacks_from_a_read_only_index_folder(box: Path) -> None:
    code, out = run(indexer(box), box)
    assert code == 0, out
    assert (box / "indexes" / "docs" / "meta.json").stat().st_uid == USER
    gateway_service = shipped()["services"]["gateway"]
    assert "indexes:/var/lib/kbgate/indexes:ro" in gateway_service["volumes"] and gateway_service["read_only"]
    port = int(tomllib.loads((box / "gateway.toml").read_text())["server"]["bind"].rsplit(":", 1)[1])
    srv = Server(gateway(box), port, log_path=box / "serve.log", workers=2, cwd=ROOT,
                 env={"TMPDIR": str(box / "tmpfs"), "PYTHONDONTWRITEBYTECODE": "1"})
    with srv, httpx.Client(timeout=10, headers={"connection": "close"}) as c:
        # each worker loads the embedding model on its own: ready once new connections find both done
        def every_worker_ready() -> httpx.Response | None:
            answers = [c.get(f"{srv.base}/readyz") for _ in range(4)]
            return answers[-1] if all(a.status_code == 200 for a in answers) else None

        ready = until(every_worker_ready, within=120, every=0.5, what="/readyz from both workers")
        [route] = orjson.loads(ready.content)["routes"]
        assert route["state"] == "ok" and route["commit"], route
        for _ in range(6):  # a new connection each: both workers answer
            r = post(c, srv.base, SECRET, query="密钥轮换")
            assert r.status_code == 200 and ret(r) == 0, r.text
            assert any("rotation" in (x.get("Url") or "") for x in orjson.loads(r.content)["Result"]), r.text
        # The indexer runs again (compose: `docker compose run --rm indexer`): the gateway shows it.
        (box / "docs" / "ops" / "tea.md").write_text("# 泡茶\n\n绿茶用八十度的水冲泡三分钟。\n", "utf-8")
        os.chown(box / "docs" / "ops" / "tea.md", USER, USER)
        code, out = run(indexer(box), box)
        assert code == 0, out
        deadline = time.monotonic() + 30
        while True:
            found = [orjson.loads(post(c, srv.base, SECRET, query="绿茶怎么泡").content) for _ in range(2)]
            if all(f["Ret"] == 0 and f["Result"] for f in found):
                break
            assert time.monotonic() < deadline, (found, srv.logs()[-3000:])
            time.sleep(0.3)
        assert c.get(f"{srv.base}/readyz").status_code == 200
        # Inside the same mounts: check-config calls the index fine, a write is refused naming the folder.
        code, out = run(gateway(box, "check-config", "--config", str(box / "gateway.toml")), box)
        assert code == 0 and "DAMAGED" not in out and "delete" not in out, out
        code, out = run(gateway(box, "index", "add", "--config", str(box / "gateway.toml"), "--index", "docs",
                                "--no-progress", str(box / "docs")), box)
        assert code == 1 and f"Index 'docs' at {box / 'indexes' / 'docs'} is on a read-only folder" in out, out
        assert "Traceback" not in out and "delete the folder" not in out
    logs = srv.logs()
    assert "Traceback" not in logs and "DAMAGED" not in logs and "damaged" not in logs, logs[-3000:]
