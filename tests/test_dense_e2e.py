"""Hybrid retrieval end to end: `kbgate index add` embeds at ingest for an index configured
hybrid, then a real `kbgate serve` answers a signed Volcengine callback, the knowledge
protocol and the tool API through the one search entry — and keeps answering (lexically,
within the deadline) when the embedding service goes down."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson

from gateway.principals import token_hash
from gateway.probe import wait_ready
from gateway.signing import sign_headers
from tests.conftest import ROOT, free_port
from tests.embedding_server import running as embedding_server

SECRET = "e2e-webhook-secret-0123456789abcdef"
TOKEN = "hybrid-e2e-token-AAAAAAAAAAAAAAAAAAAA"
REF_KEY = "ref-master-key-0123456789-abcdefghijklmnop"
PAGES = {
    "account/password.md": "# 账号管理\n\n重置管理员口令：在登录页点击找回，按邮件里的链接设置新口令。\n",
    "ops/scale.md": "# 集群扩容\n\n向集群添加新的存储节点，数据会自动均衡。\n",
    "ops/slowlog.md": "# 慢日志\n\n记录执行时间超过阈值的语句。\n",
    "ops/backup.md": "# 备份\n\n使用 BR 工具把全量数据备份到 S3 对象存储。\n",
}
QUESTION = "忘记密码了怎么办"  # shares no word with account/password.md: only the vectors find it


def write_site(tmp: Path, dense: str, port: int) -> Path:
    docs = tmp / "docs"
    for rel, text in PAGES.items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, "utf-8")
    (tmp / "secret").write_text(SECRET)
    cfg = tmp / "gateway.toml"
    cfg.write_text(f"""
[server]
bind = "127.0.0.1:{port}"
[indexes]
dir = "indexes"
[indexes.docs.dense]
{dense}
[tenants.acme]
[[tenants.acme.secrets]]
id = "k1"
value_file = "secret"
[[tenants.acme.routes]]
first_level_id = "tech"
second_level_id = "docs"
index = "docs"
[agent]
ref_key_env = "KBGATE_REF_KEY"
[agent.routes.support]
index = "docs"
[agent.clients.bot]
routes = ["support"]
tools = ["knowledge.search", "search"]
datasets = ["*"]
path_globs = ["**"]
[[agent.clients.bot.tokens]]
id = "t1"
sha256 = "{token_hash(TOKEN)}"
[access]
sqlite_path = "feedback.sqlite3"
""", "utf-8")
    return cfg


def kbgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def callback(client: httpx.Client, query: str) -> dict:
    body = orjson.dumps({"FirstLevelId": "tech", "SecondLevelId": "docs", "Query": query, "Limit": 3})
    r = client.post("/volcengine/acme", content=body, headers=sign_headers(SECRET, body, int(time.time())))
    assert r.status_code == 200, r.text
    return orjson.loads(r.content)


def serve(cfg: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(cfg)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "KBGATE_REF_KEY": REF_KEY})
    wait_ready(f"http://127.0.0.1:{port}", proc)
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


def first_ids(answer: dict) -> list[str]:
    return [item["Id"] for item in answer["Result"]]


def test_local_model_hybrid_through_callback_knowledge_protocol_and_tool_api(tmp_path: Path) -> None:
    port = free_port()
    cfg = write_site(tmp_path, 'provider = "local"\nmodel = "use-multilingual-v3"\nquery_timeout_ms = 5000', port)
    built = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(tmp_path / "docs"))
    assert built.returncode == 0, built.stderr
    assert "vectors of generation" in built.stdout and "4 embedded" in built.stdout
    proc = serve(cfg, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            deadline = time.monotonic() + 30  # the worker loads the model in the background
            answer = callback(client, QUESTION)
            while first_ids(answer)[:1] != ["account/password.md"] and time.monotonic() < deadline:
                time.sleep(0.5)
                answer = callback(client, QUESTION)
            assert answer["Ret"] == 0 and first_ids(answer)[0] == "account/password.md"
            assert answer["Result"][0]["Title"] == "账号管理"
            auth = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json"}
            r = client.post("/agent-api/v1/workspaces/support/knowledge/search", headers=auth,
                            content=orjson.dumps({"query": QUESTION}))
            assert r.status_code == 200, r.text
            assert r.json()["hints"][0]["title"] == "账号管理"
            r = client.post("/agent-access/v1/tools/search", headers=auth,
                            content=orjson.dumps({"caller": {"type": "agent"}, "input": {"query": QUESTION}}))
            assert r.status_code == 200, r.text
            assert r.json()["data"]["results"][0]["citation"]["docId"] == "account/password.md"
    finally:
        stop(proc)


def test_callback_answers_lexically_within_the_deadline_when_the_embedding_service_dies(tmp_path: Path) -> None:
    port, emb_port = free_port(), free_port()
    dense = (f'provider = "openai"\nmodel = "use-multilingual-v3"\nurl = "http://127.0.0.1:{emb_port}/v1/embeddings"\n'
             "query_timeout_ms = 800\nbreaker_failures = 2\nbreaker_reset_seconds = 600")
    cfg = write_site(tmp_path, dense, port)
    proc = None
    try:
        with embedding_server(emb_port):
            built = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress",
                           str(tmp_path / "docs"))
            assert built.returncode == 0, built.stderr
            proc = serve(cfg, port)
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                assert first_ids(callback(client, QUESTION))[0] == "account/password.md"
        # The embedding service is gone now: every callback is still answered, lexically, in time.
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
            for query in ("备份到 S3", "慢日志 语句", "集群 节点"):
                t0 = time.monotonic()
                answer = callback(client, query)
                assert time.monotonic() - t0 < 2.0
                assert answer["Ret"] == 0 and answer["Result"], answer
            assert first_ids(callback(client, "备份到 S3"))[0] == "ops/backup.md"
            # The breaker is open (2 failures): an answer without any wait for the dead service.
            t0 = time.monotonic()
            assert callback(client, "集群扩容")["Ret"] == 0
            assert time.monotonic() - t0 < 0.5
    finally:
        if proc is not None:
            stop(proc)


def test_index_add_with_the_embedding_service_down_fails_clearly_and_commits_nothing(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    cfg = write_site(tmp_path, f'provider = "openai"\nmodel = "m"\nurl = "{dead}"\nretries = 0\n'
                               'api_key_env = "KBGATE_TEST_EMBEDDING_KEY"', free_port())
    r = subprocess.run([sys.executable, "-m", "gateway.cli", "index", "add", "--config", str(cfg), "--index", "docs",
                        "--no-progress", str(tmp_path / "docs")], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env={**os.environ, "KBGATE_TEST_EMBEDDING_KEY": "sk-never-shown"})
    assert r.returncode == 1
    assert "embedding provider 'openai': connect" in r.stderr and "nothing was committed" in r.stderr
    assert "sk-never-shown" not in r.stderr + r.stdout
    listed = kbgate("index", "stats", "--config", str(cfg), "--index", "docs")
    assert "documents=0" in listed.stdout, listed.stdout + listed.stderr


def test_check_config_says_whether_the_vectors_of_the_latest_commit_are_published(tmp_path: Path) -> None:
    cfg = write_site(tmp_path, 'provider = "local"\nmodel = "use-multilingual-v3"', free_port())
    env = {"KBGATE_REF_KEY": REF_KEY}
    before = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert "index docs: hybrid (local use-multilingual-v3): index not built yet" in before.stdout, before.stderr
    assert kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress",
                  str(tmp_path / "docs")).returncode == 0
    after = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120, env={**os.environ, **env})
    assert after.returncode == 0, after.stdout + after.stderr
    assert "index docs: hybrid (local use-multilingual-v3): 4 vectors of generation" in after.stdout
    assert "(current)" in after.stdout
