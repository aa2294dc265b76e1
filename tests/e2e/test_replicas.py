"""Many replicas without a rebuild on each, with real processes only.

Rationale: docs/design-notes.md, "tests/e2e/test_replicas.py".
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

from indexes.stats import read_commit
from tests.support.callbacks import post
from tests.support.configs import ACME_KEYS, ENV, SECRET_ACME, config, tenant, write
from tests.support.harness import Server, free_port, kbgate, serve
from tests.support.paths import ROOT
from tests.support.store_server import store_server


def found(gw: Server, query: str) -> list[str]:
    """The Ids a signed callback for `query` gets from the replica."""
    with httpx.Client(timeout=10) as c:
        r = post(c, gw.base, SECRET_ACME, query=query, limit=5)
    assert r.status_code == 200, r.text
    return [str(item["Id"]) for item in orjson.loads(r.content)["Result"]]


def served_commits(gw: Server, probes: int = 6) -> set[str]:
    """The commits /readyz names for route tech/software over a few probes (any worker answers)."""
    out = set()
    for _ in range(probes):
        body = httpx.get(gw.base + "/readyz", timeout=10).json()
        out |= {r["commit"] for r in body["routes"] if r["index"] == "kb"}
    return out


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return kbgate(*args, env=ENV)


def test_a_second_replica_serves_published_commits_without_building_them(tmp_path: Path, redis_url: str,
                                                                         key_prefix: str) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "rotation.md").write_text("# 密钥轮换\n\n新旧两把密钥可以同时生效，确认旧密钥不再使用后退役。\n", "utf-8")
    (tmp_path / "writer").mkdir()
    (tmp_path / "replica").mkdir()
    writer = write(tmp_path / "writer" / "gateway.toml", config(tmp_path / "writer"))
    store = tmp_path / "store"

    def commit_and_publish() -> str:
        assert run("index", "add", "--config", str(writer), "--index", "kb", "--no-progress", str(docs)).returncode == 0
        pub = run("index", "publish", "--config", str(writer), "--index", "kb", str(store))
        commit = read_commit(tmp_path / "writer" / "indexes" / "kb")[1]
        assert pub.returncode == 0 and commit is not None and f"commit {commit}" in pub.stdout, pub.stderr
        return commit

    first = commit_and_publish()
    port = free_port()
    replica_root = tmp_path / "replica"
    replica = write(replica_root / "gateway.toml", config(
        replica_root, tenants=[tenant("acme", keys=ACME_KEYS)], port=port, workers=2, redis_url=redis_url,
        key_prefix=key_prefix))
    fetch = ("index", "fetch", "--config", str(replica), "--index", "kb")

    # 1. the first fetch, over HTTP; then the replica serves it
    with store_server(store) as http:
        got = run(*fetch, http.base)
    assert got.returncode == 0 and f"fetched commit {first}" in got.stdout, got.stdout + got.stderr
    with serve(replica, port=port, workers=2, env=ENV) as gw:
        assert "rotation.md" in found(gw, "密钥轮换")
        assert served_commits(gw) == {first}
        check = run("check-config", "--config", str(replica))
        assert f"index kb: commit {first} (fetched from http://127.0.0.1:" in check.stdout, check.stdout

        # 2. a new commit, one of its objects damaged in the store: refused by its checksum
        (docs / "mars.md").write_text("# 火星基地补给\n\n火星基地每月接收一次补给舱。\n", "utf-8")
        second = commit_and_publish()
        manifests = {c: orjson.loads((store / "kb" / "generations" / f"{c}.json").read_bytes())["files"]
                     for c in (first, second)}
        old_objects = {f["sha256"] for f in manifests[first].values()}
        new_object = max((f for f in manifests[second].values() if f["sha256"] not in old_objects),
                         key=lambda f: f["size"])
        victim = store / "kb" / "objects" / new_object["sha256"][:2] / new_object["sha256"]
        data = bytearray(victim.read_bytes())
        data[len(data) // 2] ^= 0xFF
        victim.write_bytes(bytes(data))
        refused = run(*fetch, str(store))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert "does not match its checksum" in refused.stderr and f"keeps serving commit {first}" in refused.stderr
        assert served_commits(gw) == {first} and not [i for i in found(gw, "火星基地") if i.startswith("mars")]

        # 3. publishing again repairs it; a fetch killed half-way through a download changes nothing
        assert run("index", "publish", "--config", str(writer), "--index", "kb", str(store)).returncode == 0
        with store_server(store, stall=True) as stalling:
            proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", *fetch, stalling.base], cwd=ROOT,
                                    env={**os.environ, **ENV}, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 60
            while "stalled" not in stalling.logs() and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.05)
            assert "stalled" in stalling.logs(), stalling.logs()[-2000:]
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        assert list((replica_root / "indexes" / ".fetch" / "kb").rglob("*"))  # what the kill left behind
        time.sleep(1.0)  # more than a reload check: nothing changed for the workers to pick up
        assert served_commits(gw) == {first} and not [i for i in found(gw, "火星基地") if i.startswith("mars")]

        # 4. the fetch that completes: the running workers serve the new commit
        done = run(*fetch, str(store))
        assert done.returncode == 0 and f"fetched commit {second} from {store} (was {first})" in done.stdout, \
            done.stdout + done.stderr
        deadline = time.monotonic() + 5
        while served_commits(gw, 2) != {second} and time.monotonic() < deadline:
            time.sleep(0.2)
        assert served_commits(gw) == {second}
        assert "mars.md" in found(gw, "火星基地") and "rotation.md" in found(gw, "密钥轮换")
        assert not (replica_root / "indexes" / ".fetch" / "kb").exists()
        assert gw.proc is not None and gw.proc.poll() is None  # the same processes, no restart
