"""Hybrid retrieval end to end: `kbgate index add` embeds at ingest for a new index (hybrid by
default, or configured hybrid), then a real `kbgate serve` answers a signed Volcengine callback, the knowledge
protocol, the tool API, Dify's External Knowledge API and the MCP server through the one
search entry — and keeps answering (lexically,
within the deadline) when the embedding service goes down."""

from __future__ import annotations

import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import httpx
import orjson

from tests.support import harness
from tests.support.callbacks import answered, post, result_ids
from tests.support.configs import (
    ACME_KEYS,
    EMBEDDING_KEY,
    ENV,
    EVERYTHING,
    SECRET_ACME,
    TOKEN_ALICE,
    client,
    config,
    tenant,
    write,
)
from tests.support.documents import HYBRID_DOCS, KB_DOCS, PARAPHRASE, as_jsonl
from tests.support.embedding_server import running as embedding_server
from tests.support.harness import Server, free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.paths import ROOT
from tests.support.polling import eventually, until

LOCAL = {"provider": "local", "model": "use-multilingual-v3"}


def write_site(tmp: Path, dense: dict[str, Any] | None, port: int, *, lexical: bool = False,
               notes: bool = False, answer_cache: bool = True) -> Path:
    """tmp/docs/pages.jsonl (HYBRID_DOCS) and tmp/gateway.toml: tenant acme's route tech/docs and
    the agent routes over index 'docs', configured hybrid with `dense` (None: no dense setting,
    the default); with `lexical`, also tmp/kb/pages.jsonl (KB_DOCS) and the route tech/kb over
    index 'kb', configured `dense = "none"`; with `notes`, the route tech/notes over index
    'notes', which alice may write through the document API; without `answer_cache`, every
    callback is searched (`[search] answer_cache_entries = 0`)."""
    (tmp / "docs").mkdir()
    (tmp / "docs" / "pages.jsonl").write_text(as_jsonl(HYBRID_DOCS), "utf-8")
    routes = [("tech", "docs", "docs")]
    if lexical:
        (tmp / "kb").mkdir()
        (tmp / "kb" / "pages.jsonl").write_text(as_jsonl(KB_DOCS), "utf-8")
        routes.append(("tech", "kb", "kb"))
    if notes:
        routes.append(("tech", "notes", "notes"))
    acme = tenant("acme", keys=ACME_KEYS, routes=routes)
    tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search"]
    alice = client("t1", TOKEN_ALICE, ["support"], [*tools, "documents.write"] if notes else tools,
                   **({"write_indexes": ["notes"]} if notes else {}), **EVERYTHING)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}}, "clients": {"alice": alice}}
    # No relevance floor: PARAPHRASE's page lies at cosine 0.25 in the small model, as close as an
    # off-topic question's nearest laws-cn chunk (its relevance is ~0, under the default floor);
    # these tests are about the hybrid path itself. Floors on hybrid indexes: tests/e2e/test_relevance.py.
    data = config(tmp, tenants=[acme], port=port, dense=None if dense is None else {"docs": dense}, agent=agent,
                  lexical=["kb"] if lexical else [],
                  access={"sqlite_path": "feedback.sqlite3"},
                  search={"relevance_floor": 0, **({} if answer_cache else {"answer_cache_entries": 0})})
    return write(tmp / "gateway.toml", data)


def kbgate(*args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI, with the suite's secrets (and the embedding key) in its environment."""
    return harness.kbgate(*args, env=ENV, timeout=300)


def index_add(cfg: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    return kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(tmp / "docs"))


def callback(client: httpx.Client, base: str, query: str) -> dict[str, Any]:
    return answered(client, base, SECRET_ACME, second="docs", query=query, limit=3)


first_ids = result_ids


def hybrid_searches(metrics: str, outcome: str) -> float:
    """kbgate_hybrid_searches_total of index 'docs' and `outcome` in a /metrics text (0 when absent)."""
    found = re.search(rf'^kbgate_hybrid_searches_total{{index="docs",outcome="{outcome}"}} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def server(cfg: Path, port: int) -> Server:
    """`kbgate serve` of `cfg` on `port` with the suite's secrets, one worker; not started yet
    (`with server(...) as srv` starts and stops it)."""
    return serve(cfg, port=port, env=ENV, cwd=ROOT)


async def _mcp_first_title(base: str) -> str:
    async with connect(base + "/mcp", TOKEN_ALICE) as c:
        found = payload(await c.call_tool("search", {"query": PARAPHRASE}))["results"]
    return str(found[0]["title"])


def test_a_new_index_is_hybrid_by_default_through_every_caller(tmp_path: Path) -> None:
    """No dense setting anywhere: `kbgate index add` embeds a new index with the embedded model
    and prints what the build cost; index 'notes', made by `kbgate index create` (a PUT before
    that is a 404), is hybrid too; the Volcengine callback, the knowledge protocol, the tool API, Dify and MCP all
    find the page a paraphrase shares no word with (BM25 alone cannot: see the lexical index)."""
    from indexes.dense.vectors import load_current

    port = free_port()
    cfg = write_site(tmp_path, None, port, notes=True)
    assert "dense" not in cfg.read_text("utf-8")  # the default path: nothing opts in
    built = index_add(cfg, tmp_path)
    assert built.returncode == 0, built.stderr
    assert "vectors of generation" in built.stdout and "5 embedded" in built.stdout
    assert "build costs: embedding" in built.stdout and "CPU-s per 1,000 chunks" in built.stdout
    assert "per 100k chunks, extrapolated from this build's 5" in built.stdout
    checked = kbgate("check-config", "--config", str(cfg))
    assert "index docs: hybrid (local use-multilingual-v3, the default): 5 vectors of generation" in checked.stdout
    auth = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}
    with server(cfg, port) as srv, httpx.Client(timeout=60) as client:
        assert eventually(lambda: first_ids(callback(client, srv.base, PARAPHRASE))[:1], ["pw"]) == ["pw"]
        answer = callback(client, srv.base, PARAPHRASE)
        assert answer["Result"][0]["Title"] == "账号管理" and "secret" not in first_ids(answer)

        def knowledge() -> str:
            r = client.post(f"{srv.base}/agent-api/v1/workspaces/support/knowledge/search", headers=auth,
                            content=orjson.dumps({"query": PARAPHRASE}))
            assert r.status_code == 200, r.text
            return str(r.json()["hints"][0]["title"])

        def tool() -> str:
            r = client.post(f"{srv.base}/agent-access/v1/tools/search", headers=auth,
                            content=orjson.dumps({"caller": {"type": "agent"}, "input": {"query": PARAPHRASE}}))
            assert r.status_code == 200, r.text
            return str(r.json()["data"]["results"][0]["citation"]["docId"])

        def dify() -> str:
            r = client.post(f"{srv.base}/dify/retrieval", headers=auth, content=orjson.dumps(
                {"knowledge_id": "support", "query": PARAPHRASE,
                 "retrieval_setting": {"top_k": 3, "score_threshold": 0}}))
            assert r.status_code == 200, r.text
            return str(r.json()["records"][0]["metadata"]["document_id"])

        assert eventually(knowledge, "账号管理") == "账号管理"
        assert eventually(tool, "pw") == "pw"
        assert eventually(dify, "pw") == "pw"
        assert eventually(lambda: anyio.run(_mcp_first_title, srv.base), "账号管理") == "账号管理"
        # a write never creates an index: 'notes' is a 404 until `kbgate index create`, then hybrid by default
        page = {"title": "远程办公", "content": "在家连接公司内网：先启动客户端，再输入动态口令。"}
        r = client.put(f"{srv.base}/documents/v1/indexes/notes/documents/vpn", content=orjson.dumps(page),
                       headers=auth)
        assert r.status_code == 404 and r.json()["errors"][0]["code"] == "documents.index_not_found", r.text
        made = harness.kbgate("index", "create", "--config", str(cfg), "--index", "notes")
        assert made.returncode == 0, made.stderr
        r = client.put(f"{srv.base}/documents/v1/indexes/notes/documents/vpn", content=orjson.dumps(page),
                       headers=auth)
        assert r.status_code == 200, r.text
        vectors = load_current(tmp_path / "indexes" / "notes", view=False)
        assert vectors is not None and vectors.revision_of.get("vpn") == r.json()["data"]["documents"][0]["revision"]

        def notes() -> list[str]:
            r = post(client, srv.base, SECRET_ACME, second="notes", query="在家里怎么访问公司的系统", limit=3)
            assert r.status_code == 200, r.text
            return first_ids(orjson.loads(r.content))[:1]

        assert eventually(notes, ["vpn"]) == ["vpn"]
        assert hybrid_searches(client.get(f"{srv.base}/metrics").text, "hybrid") >= 5


def test_a_cold_start_answers_hybrid_from_the_first_callback(tmp_path: Path) -> None:
    """/readyz waits until the worker's query model has loaded and answered once, so the first
    callback after it is answered hybrid: no fallback is counted, the breaker never opened."""
    port = free_port()
    cfg = write_site(tmp_path, None, port)
    built = index_add(cfg, tmp_path)
    assert built.returncode == 0, built.stderr
    with server(cfg, port) as srv, httpx.Client(timeout=60) as client:  # started: /readyz answered 200
        assert first_ids(callback(client, srv.base, PARAPHRASE))[:1] == ["pw"]  # BM25 alone cannot find it
        metrics = client.get(f"{srv.base}/metrics").text
        assert hybrid_searches(metrics, "hybrid") == 1
        other = r'^kbgate_hybrid_searches_total{index="docs",outcome="(?!hybrid)[^"]*"} (\S+)$'
        fell = re.findall(other, metrics, re.M)
        assert sum(float(n) for n in fell) == 0.0


def test_an_index_built_lexical_keeps_serving_and_says_how_to_add_vectors(tmp_path: Path) -> None:
    """An index built before hybrid was the default (no vectors) keeps answering lexically;
    check-config and /readyz name the one command that adds its vectors, `kbgate index embed`,
    after which it is hybrid; `dense = "none"` keeps such an index lexical without a note."""
    from indexes.store import IndexStore

    port = free_port()
    cfg = write_site(tmp_path, None, port)
    IndexStore(tmp_path / "indexes").create_or_open_for_write("docs").ingest(HYBRID_DOCS, progress=False)
    step = f"`kbgate index embed --config {cfg} --index docs`"
    checked = kbgate("check-config", "--config", str(cfg))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"index docs is lexical: built before hybrid was the default, it has no vectors; add them with {step}" \
        in checked.stdout
    with server(cfg, port) as srv, httpx.Client(timeout=30) as client:
        assert first_ids(callback(client, srv.base, "备份到 S3"))[:1] == ["br"]  # lexical, as before
        ready = client.get(f"{srv.base}/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert any(step in note for note in ready.json()["notes"]), ready.json()
    again = index_add(cfg, tmp_path)  # a run over it keeps it lexical, and says so
    assert again.returncode == 0 and "vectors of generation" not in again.stdout
    assert "kbgate: note: index docs is lexical" in again.stderr and step in again.stderr
    embedded = kbgate("index", "embed", "--config", str(cfg), "--index", "docs", "--no-progress")
    assert embedded.returncode == 0, embedded.stderr
    assert "5 embedded" in embedded.stdout and "build costs: embedding" in embedded.stdout
    after = kbgate("check-config", "--config", str(cfg))
    assert "index docs: hybrid (local use-multilingual-v3, the default): 5 vectors of generation" in after.stdout
    assert "is lexical" not in after.stdout
    cfg.write_text(cfg.read_text("utf-8") + '\n[indexes.kb]\ndense = "none"\n', "utf-8")
    IndexStore(tmp_path / "indexes").create_or_open_for_write("kb").ingest(HYBRID_DOCS, progress=False)
    refused = kbgate("index", "embed", "--config", str(cfg), "--index", "kb")
    assert refused.returncode == 2 and 'configured dense = "none"' in refused.stderr


def test_callback_answers_lexically_within_the_deadline_when_the_embedding_service_dies(tmp_path: Path) -> None:
    port, emb_port = free_port(), free_port()
    deadline = 0.8  # seconds: the query embedding's deadline
    dense = {"provider": "openai", "model": "use-multilingual-v3", "url": f"http://127.0.0.1:{emb_port}/v1/embeddings",
             "query_timeout_ms": int(deadline * 1000), "breaker_failures": 2, "breaker_reset_seconds": 600}
    cfg = write_site(tmp_path, dense, port)
    srv: Server | None = None
    try:
        with embedding_server(emb_port), httpx.Client(timeout=30) as client:
            built = index_add(cfg, tmp_path)
            assert built.returncode == 0, built.stderr
            srv = server(cfg, port).start()
            assert first_ids(callback(client, srv.base, PARAPHRASE))[0] == "pw"
        # The embedding service is gone now: every callback is still answered, lexically, in time
        # (its deadline, with what a loaded machine adds).
        with httpx.Client(timeout=30) as client:
            for query in ("备份到 S3", "慢日志 语句", "集群 节点"):
                t0 = time.monotonic()
                answer = callback(client, srv.base, query)
                assert time.monotonic() - t0 < deadline + 3.0
                assert answer["Ret"] == 0 and answer["Result"], answer
            assert first_ids(callback(client, srv.base, "备份到 S3"))[0] == "br"
            # The breaker is open (2 failures): this answer does not call (nor wait for) the dead
            # service at all; the search says so in its outcome.
            before = hybrid_searches(client.get(f"{srv.base}/metrics").text, "breaker_open")
            assert before >= 1
            assert callback(client, srv.base, "集群扩容")["Ret"] == 0
            metrics = client.get(f"{srv.base}/metrics").text
            assert hybrid_searches(metrics, "breaker_open") == before + 1
            assert hybrid_searches(metrics, "hybrid") == 1
            assert hybrid_searches(metrics, "timeout") + hybrid_searches(metrics, "error") == 2  # opened it
    finally:
        if srv is not None:
            srv.stop()


def test_a_repeated_question_is_embedded_once_whatever_its_whitespace(tmp_path: Path) -> None:
    # The answer cache is off: every callback is searched, and only the query-vector cache
    # (keyed on the question normalised as the answer cache keys it) spares the embedding.
    port, emb_port = free_port(), free_port()
    dense = {"provider": "openai", "model": "use-multilingual-v3", "url": f"http://127.0.0.1:{emb_port}/v1/embeddings"}
    cfg = write_site(tmp_path, dense, port, answer_cache=False)
    with embedding_server(emb_port) as emb, httpx.Client(timeout=30) as client:
        assert index_add(cfg, tmp_path).returncode == 0
        with server(cfg, port) as srv:
            assert first_ids(callback(client, srv.base, PARAPHRASE))[0] == "pw"
            asked = httpx.get(f"{emb}/stats").json()["requests"]
            for variant in (PARAPHRASE, f"  {PARAPHRASE}\t", f"\n{PARAPHRASE}\u3000"):
                assert first_ids(callback(client, srv.base, variant))[0] == "pw"
            assert httpx.get(f"{emb}/stats").json()["requests"] == asked  # each from the vector cache
            assert first_ids(callback(client, srv.base, "备份到 S3"))[0] == "br"
            assert httpx.get(f"{emb}/stats").json()["requests"] == asked + 1  # a new question is embedded
            assert first_ids(callback(client, srv.base, "备份到\u3000\u3000S3 "))[0] == "br"
            assert httpx.get(f"{emb}/stats").json()["requests"] == asked + 1
            assert hybrid_searches(client.get(f"{srv.base}/metrics").text, "hybrid") == 6


def test_index_add_with_the_embedding_service_down_fails_clearly_and_commits_nothing(tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1/embeddings"
    cfg = write_site(tmp_path, {"provider": "openai", "model": "m", "url": dead, "retries": 0,
                                "api_key_env": "KBGATE_EMBEDDING_KEY"}, free_port())
    r = index_add(cfg, tmp_path)
    assert r.returncode == 1
    assert "embedding provider 'openai': connect" in r.stderr and "nothing was committed" in r.stderr
    assert EMBEDDING_KEY not in r.stderr + r.stdout
    listed = kbgate("index", "stats", "--config", str(cfg), "--index", "docs")
    assert "documents=0" in listed.stdout, listed.stdout + listed.stderr


def test_check_config_says_whether_the_vectors_of_the_latest_commit_are_published(tmp_path: Path) -> None:
    cfg = write_site(tmp_path, LOCAL, free_port())
    before = kbgate("check-config", "--config", str(cfg))
    assert before.returncode == 1  # the route's index is missing
    assert "index docs: hybrid (local use-multilingual-v3): index not built yet" in before.stdout, before.stderr
    assert index_add(cfg, tmp_path).returncode == 0
    after = kbgate("check-config", "--config", str(cfg))
    assert after.returncode == 0, after.stdout + after.stderr
    assert "index docs: hybrid (local use-multilingual-v3): 5 vectors of generation" in after.stdout
    assert "(current)" in after.stdout


def test_a_slow_embedding_service_never_holds_up_the_other_callbacks_of_the_worker(tmp_path: Path) -> None:
    """One worker; a hybrid callback waits ~4.5 s for its query embedding (the real embeddings
    server, slowed): meanwhile callbacks to a lexical index of the same worker are all answered.
    Before searches that may wait ran off the event loop, each of them waited behind it (and so
    could only be answered after it)."""
    slow_s = 4.5  # the embedding's delay: far longer than five lexical callbacks on a loaded machine
    port, emb_port = free_port(), free_port()
    dense = {"provider": "openai", "model": "use-multilingual-v3", "url": f"http://127.0.0.1:{emb_port}/v1/embeddings",
             "query_timeout_ms": 9000, "breaker_failures": 100}
    cfg = write_site(tmp_path, dense, port, lexical=True)
    with embedding_server(emb_port) as emb:
        assert index_add(cfg, tmp_path).returncode == 0
        assert kbgate("index", "add", "--config", str(cfg), "--index", "kb", "--no-progress",
                      str(tmp_path / "kb")).returncode == 0
        with server(cfg, port) as srv, httpx.Client(timeout=30) as client, ThreadPoolExecutor(1) as pool:
            assert first_ids(callback(client, srv.base, "备份到 S3"))[0] == "br"  # hybrid, fast: warm
            asked = httpx.get(f"{emb}/stats").json()["requests"]
            httpx.post(f"{emb}/control", json={"delay": slow_s}).raise_for_status()
            t0 = time.monotonic()
            slow = pool.submit(callback, httpx.Client(timeout=60), srv.base, PARAPHRASE)
            until(lambda: httpx.get(f"{emb}/stats").json()["requests"] > asked, within=30,
                  what="the hybrid callback asked for its embedding")  # it is waiting for it now
            for query in ("密钥轮换", "重放攻击", "软件安装", "密钥", "随机串"):
                r = post(client, srv.base, SECRET_ACME, second="kb", query=query, limit=3)
                assert r.status_code == 200 and orjson.loads(r.content)["Result"], r.text
            assert not slow.done()  # all answered while the hybrid one still waited
            answer = slow.result()
            took = time.monotonic() - t0
    assert took >= slow_s and first_ids(answer)[0] == "pw"  # it did wait, and got the vectors' answer


def test_the_document_api_embeds_what_it_writes_and_writes_nothing_when_the_provider_fails(tmp_path: Path) -> None:
    """A PUT to a hybrid index: its chunks are embedded before the commit and the
    vectors of that commit are published before the answer, so a paraphrase finds it at once;
    with the embedding service failing, the PUT is a retryable 502 and nothing is written."""
    from indexes.dense.vectors import load_current

    port, emb_port = free_port(), free_port()
    dense = {"provider": "openai", "model": "use-multilingual-v3", "url": f"http://127.0.0.1:{emb_port}/v1/embeddings",
             "query_timeout_ms": 4000, "retries": 1, "backoff_seconds": 0.1}
    cfg = write_site(tmp_path, dense, port)
    text = cfg.read_text("utf-8").replace('tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search"]',
                                          'tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search", '
                                          '"documents.write"]\nwrite_indexes = ["docs"]')
    cfg.write_text(text, "utf-8")
    page = {"title": "远程办公", "content": "在家连接公司内网：先启动客户端，再输入动态口令。"}
    put = "/documents/v1/indexes/docs/documents/vpn"
    auth = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}
    with embedding_server(emb_port) as emb:
        assert index_add(cfg, tmp_path).returncode == 0
        with server(cfg, port) as srv, httpx.Client(timeout=60) as client:
            httpx.post(f"{emb}/control", json={"fail": 100, "status": 503}).raise_for_status()
            r = client.put(srv.base + put, content=orjson.dumps(page), headers=auth)
            assert r.status_code == 502, r.text
            error = r.json()["errors"][0]
            assert error["code"] == "documents.embedding_failed" and error["retryable"] is True
            assert client.get(srv.base + put, headers=auth).status_code == 404  # nothing written
            httpx.post(f"{emb}/reset").raise_for_status()
            r = client.put(srv.base + put, content=orjson.dumps(page), headers=auth)
            assert r.status_code == 200, r.text
            data = r.json()["data"]
            assert data["documents"][0]["change"] == "added"
            vectors = load_current(tmp_path / "indexes" / "docs", view=False)
            assert vectors is not None and vectors.revision_of.get("vpn") == data["documents"][0]["revision"]
            assert httpx.get(f"{emb}/stats").json()["requests"] >= 1  # its chunk was embedded
            assert first_ids(callback(client, srv.base, "在家里怎么访问公司的系统"))[0] == "vpn"
            assert hybrid_searches(client.get(f"{srv.base}/metrics").text, "hybrid") >= 1
