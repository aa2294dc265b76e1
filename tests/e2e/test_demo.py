"""`make run`'s demo (issue 11): besides the signed callback it serves Dify's `/dify/retrieval`
and the MCP server at `/mcp` to a demo agent client whose token `make run` prints beside the
probe line. The config is the one deploy/demo/configure.py writes; the index is the demo's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import orjson
import pytest

from tests.support.harness import Server, free_port, kbgate, serve
from tests.support.mcp_env import connect, payload
from tests.support.paths import ROOT

pytestmark = pytest.mark.anyio


@pytest.fixture(name="demo", scope="module")
def _demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, str]]:
    out = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, str(ROOT / "deploy" / "demo" / "configure.py"), str(out)], check=True)
    cfg = out / "gateway.toml"
    r = kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
               str(ROOT / "deploy" / "demo" / "docs"))
    assert r.returncode == 0, r.stderr
    token = (out / "agent-token").read_text().strip()
    assert token not in cfg.read_text()  # the config holds only the token's hash
    with serve(cfg, port=free_port()) as s:
        yield s, token


def test_make_run_prints_the_dify_and_mcp_lines_beside_the_probe() -> None:
    shown = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "kbgate probe http://127.0.0.1:8080/volcengine/demo" in shown
    assert "API Endpoint http://127.0.0.1:8080/dify" in shown and "data/demo/agent-token" in shown
    assert '\\"url\\": \\"http://127.0.0.1:8080/mcp\\"' in shown


def test_the_demo_token_reaches_dify(demo: tuple[Server, str]) -> None:
    srv, token = demo
    body = {"knowledge_id": "docs", "query": "如何轮换密钥", "retrieval_setting": {"top_k": 3, "score_threshold": 0}}
    r = httpx.post(srv.base + "/dify/retrieval", content=orjson.dumps(body), timeout=10,
                   headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
    assert r.status_code == 200, r.text
    records = orjson.loads(r.content)["records"]
    assert records and records[0]["metadata"]["document_id"] == "ops/rotation.md"
    wrong = httpx.post(srv.base + "/dify/retrieval", content=orjson.dumps(body), timeout=10,
                       headers={"authorization": "Bearer not-the-demo-token-000000",
                                "content-type": "application/json"})
    assert wrong.status_code == 403


async def test_the_demo_token_reaches_mcp(demo: tuple[Server, str]) -> None:
    srv, token = demo
    async with connect(srv.base + "/mcp", token) as c:
        assert {t.name for t in (await c.list_tools()).tools} == {"search", "fetch"}
        found = payload(await c.call_tool("search", {"query": "如何轮换密钥"}))["results"]
        assert found and found[0]["url"].endswith("/ops/rotation")  # the page's front-matter url
        page = payload(await c.call_tool("fetch", {"id": found[0]["id"]}))
        assert "密钥" in page["text"]
