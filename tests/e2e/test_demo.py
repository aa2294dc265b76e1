"""`make run`'s demo: besides the signed callback it serves Dify's `/dify/retrieval`
and the MCP server at `/mcp` to a demo agent client whose token `make run` prints beside the
probe line. The config is the one deploy/demo/configure.py writes; the index is the demo's."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

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
    admin = (out / "admin-token").read_text().strip()
    assert token not in cfg.read_text() and admin not in cfg.read_text()  # the config holds only hashes
    subprocess.run([sys.executable, str(ROOT / "deploy" / "demo" / "configure.py"), str(out)], check=True)
    assert (out / "admin-token").read_text().strip() == admin  # kept across re-runs
    with serve(cfg, port=free_port()) as s:
        yield s, token


def test_make_run_prints_the_dify_and_mcp_lines_beside_the_probe() -> None:
    shown = subprocess.run(["make", "-n", "run"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "kbgate probe http://127.0.0.1:8080/volcengine/demo" in shown
    assert "API Endpoint http://127.0.0.1:8080/dify" in shown and "data/demo/agent-token" in shown
    assert '\\"url\\": \\"http://127.0.0.1:8080/mcp\\"' in shown
    assert "open http://127.0.0.1:8080/admin/ and log in with the admin token" in shown
    assert "cat data/demo/admin-token" in shown


@pytest.mark.browser
def test_the_printed_admin_token_opens_the_console_at_its_overview(demo: tuple[Server, str]) -> None:
    from tests.support.browser import ARGS, CHROMIUM, assert_fits, log_in

    srv, _ = demo
    admin = (Path(srv.argv[srv.argv.index("--config") + 1]).parent / "admin-token").read_text().strip()
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists()
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = b.new_page(viewport={"width": 390, "height": 800}, locale="zh-CN")
            r = page.goto(srv.base + "/admin/")
            assert r is not None and r.status == 200 and page.url == srv.base + "/admin/login"  # its login form
            log_in(page, srv.base, admin)
            assert page.url == srv.base + "/admin/" and page.locator("h1").inner_text() == "概览"  # a zh-CN browser
            routes = page.locator("section.route").evaluate_all("els => els.map(e => e.dataset.route)")
            assert sorted(routes) == ["demo/tech/software", "docs"]
            assert_fits(page)
            page.get_by_role("navigation", name="控制台").get_by_role("link", name="投递记录").click()
            page.wait_for_url(srv.base + "/admin/deliveries")
            assert page.locator("h1").inner_text() == "kbgate：最近投递"
        finally:
            b.close()


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


def test_make_run_again_keeps_documents_added_from_the_console(tmp_path: Path) -> None:
    # `make run` a second time said "6 unchanged, 2 deleted": its --delete-missing took the
    # documents added from the console.
    from indexes.store import IndexStore
    from indexes.types import Document, Section

    subprocess.run([sys.executable, str(ROOT / "deploy" / "demo" / "configure.py"), str(tmp_path)], check=True)
    cfg = tmp_path / "gateway.toml"
    assert cfg.stat().st_mode & 0o777 == 0o600  # it holds the admin token's hash
    assert (tmp_path / "session-key").stat().st_mode & 0o777 == 0o600
    with cfg.open("a") as f:
        f.write('\n[indexes.demo-docs]\ndense = "none"\n')  # lexical: what is kept does not depend on vectors
    shown = subprocess.run(["make", "-n", "demo", f"DEMO={cfg}"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout
    [line] = [x for x in shown.splitlines() if " index add " in x]

    def demo() -> str:
        r = subprocess.run(line, shell=True, cwd=ROOT, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return r.stdout

    demo()
    index = IndexStore(tmp_path / "indexes").create_or_open_for_write("demo-docs")
    index.ingest([Document("leave.md", "年假", (Section("", "提前三天申请年假。"),), path="leave.md",
                           source="document-api")], progress=False)  # as the console's upload writes it
    index.close()
    again = demo()
    assert "deleted" not in again or " 0 deleted" in again, again
    reader = IndexStore(tmp_path / "indexes").open("demo-docs")
    assert "leave.md" in reader.revisions()
