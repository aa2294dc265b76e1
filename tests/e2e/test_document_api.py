"""The document API end to end: a real `kbgate serve` on a free port (two
workers, a real Redis), its answers while signed callbacks keep arriving, what every caller sees
after one commit, a kill -9 mid-batch and a restart, and `kbgate index add` beside the server.

Index 'live' (route tech/software of tenant acme, agent route 'support') starts with one seed
page; client 'cms' may write it and search it through every wing."""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from indexes.records import document_revision
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ENV, client, config, tenant, write
from tests.support.files import docx_bytes, encrypted_pdf, guide_pdf
from tests.support.harness import Server, free_port, kbgate, kbgate_argv, serve
from tests.support.mcp_env import connect, payload
from tests.support.polling import after_promise, after_promise_async
from tests.support.readonly_mount import read_only_argv

CMS = "cms-webhook-token-0123456789abcdef"
READER = "reader-only-token-0123456789abcdef"  # search, no documents.write
ELSEWHERE = "elsewhere-token-0123456789abcdefgh"  # documents.write on another index
BASE = "/documents/v1/indexes/live"
GRANTS = ["documents.write", "search", "knowledge.search", "dify.retrieval", "mcp.search"]
AUTH = {"authorization": f"Bearer {CMS}"}
TORN_QUERY = "发布批次核对文档"


def _seed(indexes: Path) -> None:
    IndexStore(indexes).create_or_open_for_write("live").ingest(
        [Document("seed", "种子页面", (Section("", "索引建立时的第一篇文档。"),))], progress=False)


def _config(root: Path, indexes: Path, port: int, redis_url: str, *, workers: int = 2,
            documents: dict[str, Any] | None = None) -> Path:
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "live"}},
             "clients": {"cms": client("c1", CMS, ["support"], GRANTS, write_indexes=["live"], datasets=["*"],
                                       path_globs=["**"]),
                         "reader": client("r1", READER, ["support"], ["search"], datasets=["*"], path_globs=["**"]),
                         "elsewhere": client("e1", ELSEWHERE, ["support"], ["documents.write"],
                                             write_indexes=["other"], datasets=["*"], path_globs=["**"])}}
    data = config(root, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "live")])],
                  indexes=indexes, port=port, workers=workers, redis_url=redis_url,
                  key_prefix=f"kbgate-docapi-{port}", agent=agent, audit={"sink": "off"},
                  server={"graceful_timeout": 5})
    if documents:
        data["documents"] = documents
    return write(root / "gateway.toml", data)


@pytest.fixture(name="live")
def _live(tmp_path: Path, redis_url: str) -> Iterator[Server]:
    indexes = tmp_path / "indexes"
    _seed(indexes)
    port = free_port()
    with serve(_config(tmp_path, indexes, port, redis_url), port=port, env=ENV, workers=2) as srv:
        yield srv


def _write(c: httpx.Client, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
           content: bytes | None = None) -> dict[str, Any]:
    raw = content if content is not None else (orjson.dumps(body) if body is not None else None)
    headers = {**AUTH, "content-type": content_type} if raw is not None else AUTH
    r = c.request(method, path, content=raw, headers=headers)
    assert r.status_code == 200, (r.status_code, r.text)
    data: dict[str, Any] = r.json()["data"]
    return data


def _callback_ids(c: httpx.Client, base: str, query: str, limit: int = 10) -> tuple[list[str], list[str]]:
    """(ids, contents) of a signed callback's answer; it must be a 200 with Ret 0."""
    r = callback(c, base, ENV["ACME_SECRET"], query=query, limit=limit)
    assert r.status_code == 200, (r.status_code, r.text)
    env = orjson.loads(r.content)
    assert env["Ret"] == 0, env
    return [x["Id"].split("#")[0] for x in env["Result"]], [x["KnowledgeContent"] for x in env["Result"]]


def _batch(version: int) -> dict[str, Any]:
    return {"upserts": [{"id": f"torn-{i}", "title": f"{TORN_QUERY}{i}",
                         "content": f"{TORN_QUERY}，第{i}篇，版本{version:03d}。"} for i in range(10)]}


def test_callbacks_never_fail_nor_see_a_torn_batch_while_the_api_writes(live: Server) -> None:
    """Two threads of signed callbacks ask for the ten pages a batch rewrites, version after
    version, while PUTs and DELETEs of other pages go on: every answer is a 200 with Ret 0, and
    holds the ten pages of one version (a batch is one commit: never half of one)."""
    with httpx.Client(base_url=live.base, timeout=30) as c:
        data = _write(c, "POST", f"{BASE}/batch", _batch(0))
    answered = time.monotonic()
    # the other worker may show the seed-only index until visibleWithinSeconds passed (its reader
    # checks for a new commit at most every 0.5 s); from then on a version is only ever replaced whole

    def every_worker_has_the_batch() -> bool:
        for _ in range(6):  # new connections: both workers answer some of them
            with httpx.Client(timeout=30) as c:
                if sorted(_callback_ids(c, live.base, TORN_QUERY)[0]) != sorted(f"torn-{i}" for i in range(10)):
                    return False
        return True

    after_promise(answered, data["visibleWithinSeconds"], every_worker_has_the_batch,
                  what="the ten pages of the first batch, on every worker")
    stop = threading.Event()
    seen: list[set[str]] = []
    failures: list[str] = []

    def ask() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                try:
                    ids, contents = _callback_ids(c, live.base, TORN_QUERY)
                    versions = {m for text in contents for m in re.findall(r"版本(\d{3})", text)}
                    if sorted(ids) != sorted(f"torn-{i}" for i in range(10)) or len(versions) != 1:
                        failures.append(f"torn: {sorted(ids)} {versions}")
                    seen.append(versions)
                except (AssertionError, httpx.HTTPError) as exc:
                    failures.append(repr(exc)[:300])

    askers = [threading.Thread(target=ask) for _ in range(2)]
    for t in askers:
        t.start()
    try:
        with httpx.Client(base_url=live.base, timeout=60) as c:
            for version in range(1, 13):
                data = _write(c, "POST", f"{BASE}/batch", _batch(version))
                assert {d["change"] for d in data["documents"]} == {"updated"} and data["committed"]
                other = {"title": "其他页面", "content": f"无关{version}"}
                _write(c, "PUT", f"{BASE}/documents/other-{version}", other)
                if version > 1:
                    _write(c, "DELETE", f"{BASE}/documents/other-{version - 1}")
    finally:
        stop.set()
        for t in askers:
            t.join()
    assert not failures, failures[:5]
    assert len(seen) >= 20 and len({v for s in seen for v in s}) >= 3, len(seen)  # they ran across versions


@pytest.mark.anyio
async def test_a_change_is_seen_by_every_caller_after_one_commit(live: Server) -> None:
    """After a PUT's answer, every caller (the signed callback on both workers, the tool API, the
    knowledge protocol, Dify, MCP) finds the page once visibleWithinSeconds passed; after a
    DELETE's, none does."""
    word = "蓝鲸退货政策"
    with httpx.Client(base_url=live.base, timeout=30) as c:
        data = _write(c, "PUT", f"{BASE}/documents/faq-77", {"title": word, "content": f"{word}：七天内可退。"})
        answered = time.monotonic()
        assert data["documents"][0]["change"] == "added"
        everyone = {"volcengine": True, "tools": True, "knowledge": True, "dify": True, "mcp": True}

        async def found_by(want: dict[str, bool]) -> bool:
            return await _found_by_all(live, word) == want

        await after_promise_async(answered, data["visibleWithinSeconds"], lambda: found_by(everyone),
                                  what=f"every caller finds the page: {everyone}")
        data = _write(c, "DELETE", f"{BASE}/documents/faq-77")
        answered = time.monotonic()
        assert data["documents"][0]["change"] == "deleted"
        nobody = dict.fromkeys(everyone, False)
        await after_promise_async(answered, data["visibleWithinSeconds"], lambda: found_by(nobody),
                                  what=f"no caller finds the page: {nobody}")


async def _found_by_all(srv: Server, word: str) -> dict[str, bool]:
    found: dict[str, bool] = {}
    answers = []
    for _ in range(6):  # new connections: both workers answer some of them
        with httpx.Client(timeout=10) as c:
            answers.append("faq-77" in _callback_ids(c, srv.base, word)[0])
    assert len(set(answers)) == 1, answers  # every worker alike
    found["volcengine"] = answers[0]

    def post(path: str, body: dict[str, Any]) -> Any:
        r = httpx.post(srv.base + path, content=orjson.dumps(body), timeout=10,
                       headers={**AUTH, "content-type": "application/json"})
        assert r.status_code == 200, r.text
        return r.json()

    tool = post("/agent-access/v1/tools/search", {"caller": {"type": "agent"}, "input": {"query": word}})
    found["tools"] = any("faq-77" in x["id"] for x in tool["data"]["results"])
    hints = post("/agent-api/v1/workspaces/support/knowledge/search", {"query": word, "limit": 3})["hints"]
    found["knowledge"] = any(h["title"] == word for h in hints)
    dify = post("/dify/retrieval", {"knowledge_id": "support", "query": word, "metadata_condition": None,
                                    "retrieval_setting": {"top_k": 5, "score_threshold": 0.0}})
    found["dify"] = any(r["title"] == word for r in dify["records"])
    async with connect(srv.base + "/mcp", CMS) as m:
        results = payload(await m.call_tool("search", {"query": word}))["results"]
    found["mcp"] = any(r["title"] == word for r in results)
    return found


def test_retries_refusals_and_grants_on_a_real_server(live: Server) -> None:
    """Idempotent retries, a batch refused whole naming its bad document, and the grant and the
    index of the policy, as a pipeline meets them over HTTP."""
    page = {"title": "发票说明", "content": "电子发票在付款后二十四小时内发送。"}
    with httpx.Client(base_url=live.base, timeout=30) as c:
        first = _write(c, "PUT", f"{BASE}/documents/invoice", page)
        again = _write(c, "PUT", f"{BASE}/documents/invoice", page)
        assert (first["documents"][0]["change"], again["documents"][0]["change"]) == ("added", "unchanged")
        assert again["commit"] == first["commit"] and again["committed"] is False
        bad = {"upserts": [{"id": "ok-1", "content": "好的"}, {"id": "bad-1", "content": "x", "publish_time": "昨天"}],
               "deletes": ["invoice"]}
        r = c.post(f"{BASE}/batch", content=orjson.dumps(bad), headers={**AUTH, "content-type": "application/json"})
        assert r.status_code == 422 and [e["id"] for e in r.json()["errors"]] == ["bad-1"], r.text
        assert c.get(f"{BASE}/documents/ok-1", headers=AUTH).status_code == 404
        assert c.get(f"{BASE}/documents/invoice", headers=AUTH).status_code == 200  # the batch's delete: not run
        for token, code in ((READER, "access.forbidden_tool"), (ELSEWHERE, "access.forbidden_scope")):
            r = c.put(f"{BASE}/documents/x", content=orjson.dumps(page),
                      headers={"authorization": f"Bearer {token}", "content-type": "application/json"})
            assert r.status_code == 403 and r.json()["errors"][0]["code"] == code, r.text
        r = c.put(f"{BASE}/documents/x", content=orjson.dumps(page), headers={"content-type": "application/json"})
        assert r.status_code == 401


def test_ids_not_utf8_or_with_a_line_break_over_a_real_server(live: Server) -> None:
    """hypercorn decodes %C0%AF and %FF%FE each to U+FFFD (they were one document); its
    raw_path, without the query string, decides. A line break in the id, or a path no endpoint
    serves, is answered in the API's JSON envelope, never the server's plain-text 404."""
    with httpx.Client(base_url=live.base, timeout=30) as c:
        for raw in ("%C0%AF", "%FF%FE"):
            # refused before its body is read: the server may close the connection after it
            r = c.put(f"{BASE}/documents/{raw}?replace=false", content=b'{"content": "x"}',
                      headers={**AUTH, "content-type": "application/json", "connection": "close"})
            assert r.status_code == 400 and "not UTF-8" in r.json()["errors"][0]["message"], r.text
        assert c.get(f"{BASE}/documents/%EF%BF%BD", headers=AUTH).status_code == 404
        data = _write(c, "PUT", f"{BASE}/documents/%E2%9C%93?replace=false", {"content": "对勾"})
        assert data["documents"][0]["id"] == "\u2713"
        for path, code in ((f"{BASE}/documents/a%0Ab", "documents.not_found"),
                           ("/documents/v1/nope", "documents.endpoint_not_found")):
            r = c.get(path, headers=AUTH)
            assert r.status_code == 404 and r.headers["content-type"].startswith("application/json"), r.text
            assert r.json()["errors"][0]["code"] == code


def test_office_and_pdf_files_over_http_are_found_by_their_headings(live: Server) -> None:
    """A Word file and a PDF made here, PUT as a pipeline uploads them (the file's own type; a
    multipart part), are read by the converters `kbgate index add` uses: a signed callback finds
    each by its heading's words and answers that section under its heading; an encrypted PDF is
    a 422 naming why."""
    word = docx_bytes("证书续期手册", [("续期步骤", "到期前三十天申请新证书，再替换网关上的旧证书。"),
                                      ("回滚办法", "新证书出错时恢复备份的旧证书。")])
    with httpx.Client(base_url=live.base, timeout=30) as c:
        data = _write(c, "PUT", f"{BASE}/documents/ops/cert.docx", content=word,
                      content_type="application/vnd.openxmlformats-officedocument.wordprocessingml.document")
        assert data["documents"][0]["change"] == "added" and data["committed"]
        r = c.put(f"{BASE}/documents/guide.pdf", files={"file": ("guide.pdf", guide_pdf(), "application/pdf")},
                  headers=AUTH)
        answered = time.monotonic()
        assert r.status_code == 200 and r.json()["data"]["documents"][0]["change"] == "added", r.text
        after_promise(answered, r.json()["data"]["visibleWithinSeconds"],
                      lambda: (_callback_ids(c, live.base, "证书续期 回滚办法", limit=3)[0][:1] == ["ops/cert.docx"]
                               and _callback_ids(c, live.base, "TOML 配置文件", limit=3)[0][:1] == ["guide.pdf"]),
                      what="both files found by their headings")
        ids, contents = _callback_ids(c, live.base, "证书续期 回滚办法", limit=3)
        assert ids[0] == "ops/cert.docx" and "回滚办法\n新证书出错时恢复备份的旧证书。" in contents[0], (ids, contents)
        ids, contents = _callback_ids(c, live.base, "TOML 配置文件", limit=3)
        assert ids[0] == "guide.pdf" and "配置\n配置文件是 TOML 格式" in contents[0], (ids, contents)
        r = c.put(f"{BASE}/documents/locked.pdf", content=encrypted_pdf(guide_pdf(), "s3cret"),
                  headers={**AUTH, "content-type": "application/pdf"})
        assert r.status_code == 422 and r.json()["errors"][0]["code"] == "documents.document_invalid", r.text
        assert "password" in r.json()["errors"][0]["message"]


def _big_batch(n: int = 600) -> dict[str, Any]:
    text = "".join(f"第{j}段：这是一份用来拖长分析时间的长文档，包含许多不同的词语和数字{j * 7}。" for j in range(150))
    return {"upserts": [{"id": f"big-{i}", "title": f"大批量文档{i}", "content": f"{i}号。{text}"} for i in range(n)]}


def _present(indexes: Path, prefix: str) -> dict[str, str]:
    held = IndexStore(indexes).open("live").revisions()
    return {i: r for i, r in held.items() if i.startswith(prefix)}


def _send_and_kill(srv: Server, body: dict[str, Any], kill: Any, at: str) -> httpx.Response | Exception:
    """Send `body` as a batch from a thread; once the server logs `at`, call kill(). Returns
    what the client got: an answer (the kill came after it) or the error of a lost connection."""
    got: list[httpx.Response | Exception] = []

    def send() -> None:
        try:
            got.append(httpx.post(srv.base + f"{BASE}/batch", content=orjson.dumps(body), timeout=120,
                                  headers={**AUTH, "content-type": "application/json"}))
        except httpx.HTTPError as exc:
            got.append(exc)

    before = srv.logs().count(at)
    sender = threading.Thread(target=send)
    sender.start()
    deadline = time.monotonic() + 60
    while srv.logs().count(at) == before and time.monotonic() < deadline and not got:
        time.sleep(0.01)
    assert srv.logs().count(at) > before, srv.logs()[-3000:]
    kill()
    sender.join(120)
    return got[0]


def test_a_kill_9_mid_batch_loses_nothing_acknowledged_and_applies_nothing_half(tmp_path: Path,
                                                                              redis_url: str) -> None:
    indexes = tmp_path / "indexes"
    _seed(indexes)
    port = free_port()
    cfg = _config(tmp_path, indexes, port, redis_url, workers=1,
                  documents={"max_body_bytes": 64 * 1024 * 1024})
    acked: dict[str, str] = {}
    body = _big_batch()
    expected = {u["id"]: document_revision(Document(u["id"], u["title"], (Section("", u["content"]),)))
                for u in body["upserts"]}
    srv = serve(cfg, port=port, env=ENV)
    srv.start()
    try:
        with httpx.Client(base_url=srv.base, timeout=30) as c:
            for i in range(3):
                page = {"title": f"已确认{i}", "content": f"确认过的第{i}篇。"}
                data = _write(c, "PUT", f"{BASE}/documents/ack-{i}", page)
                acked[f"ack-{i}"] = data["documents"][0]["revision"]
        # 1. the worker killed while it analyses the batch (before its commit): the master starts another
        worker = srv.workers()[0]
        got = _send_and_kill(srv, body, lambda: os.kill(worker, signal.SIGKILL), "document changes applying")
        assert isinstance(got, Exception), got  # no answer: the write was not acknowledged
        deadline = time.monotonic() + 60
        while (srv.workers() == [worker] or srv.logs().count("Running on http") < 2) and time.monotonic() < deadline:
            time.sleep(0.1)
        present = _present(indexes, "big-")
        assert present in ({}, expected), (len(present), len(expected))  # whole or absent, never half
        assert _present(indexes, "ack-") == acked  # nothing acknowledged was lost
        with httpx.Client(base_url=srv.base, timeout=120) as c:  # the retry is answered correctly
            retried = _write(c, "POST", f"{BASE}/batch", body)
        assert {d["change"] for d in retried["documents"]} == ({"added"} if not present else {"unchanged"})
        assert _present(indexes, "big-") == expected
        # 2. the whole server killed once the next batch is committed, before or after its answer
        body2 = {"upserts": [{**u, "content": u["content"] + "第二版。"} for u in body["upserts"]]}
        got = _send_and_kill(srv, body2, lambda: os.killpg(srv.proc.pid, signal.SIGKILL),  # type: ignore[union-attr]
                             "document changes committed")
        srv.proc.wait(10)  # type: ignore[union-attr]
    finally:
        srv.stop()
    IndexStore(indexes).check("live")  # the index opens whole
    second = _present(indexes, "big-")
    assert set(second) == set(expected) and not set(second.values()) & set(expected.values())  # the commit is whole
    restarted = serve(cfg, port=free_port(), env=ENV)
    with restarted:
        with httpx.Client(base_url=restarted.base, timeout=120) as c:
            again = _write(c, "POST", f"{BASE}/batch", body2)  # its retry: already there
            assert {d["change"] for d in again["documents"]} == {"unchanged"} and again["committed"] is False
            assert isinstance(got, Exception) or got.status_code == 200
            for doc_id, revision in acked.items():
                r = c.get(f"{BASE}/documents/{doc_id}", headers=AUTH)
                assert r.status_code == 200 and r.json()["data"]["revision"] == revision
            data = _write(c, "PUT", f"{BASE}/documents/after", {"content": "重启之后的新文档。"})  # the lock is free
            assert data["documents"][0]["change"] == "added"


def test_kbgate_index_add_runs_beside_the_api(tmp_path: Path, live: Server) -> None:
    """`kbgate index add` on the index the server writes: each waits for the other's commit,
    both succeed, and the index holds both's documents."""
    src = tmp_path / "src"
    src.mkdir()
    for i in range(300):
        (src / f"page-{i}.md").write_text(f"# 手册第{i}页\n\n" + "运维手册的正文，说明备份与恢复。" * 40, "utf-8")
    indexes = tmp_path / "indexes"
    result: list[Any] = []
    adder = threading.Thread(target=lambda: result.append(kbgate(
        "index", "add", "--config", str(tmp_path / "gateway.toml"), "--index", "live", "--no-progress",
        "--wait", "60", str(src), env=ENV)))
    adder.start()
    puts = 0
    with httpx.Client(base_url=live.base, timeout=60) as c:
        while adder.is_alive() or puts < 5:
            data = _write(c, "PUT", f"{BASE}/documents/api-{puts}", {"content": f"接口写入的第{puts}篇。"})
            assert data["documents"][0]["change"] == "added"
            puts += 1
    adder.join()
    assert result[0].returncode == 0, result[0].stderr
    held = IndexStore(indexes).open("live").revisions()
    assert {f"page-{i}.md" for i in range(300)} <= set(held)
    assert {f"api-{i}" for i in range(puts)} <= set(held)


def test_a_write_to_a_read_only_index_folder_is_refused_and_searches_go_on(tmp_path: Path, redis_url: str) -> None:
    indexes = tmp_path / "indexes"
    _seed(indexes)
    port = free_port()
    argv = read_only_argv(indexes, kbgate_argv(_config(tmp_path, indexes, port, redis_url), bind=f"127.0.0.1:{port}",
                                               workers=2))
    with Server(argv, port, log_path=tmp_path / "serve.log", env=ENV, workers=2) as srv, \
            httpx.Client(base_url=srv.base, timeout=30) as c:
        for _ in range(2):
            r = c.put(f"{BASE}/documents/new", content=orjson.dumps({"title": "新页面", "content": "不会写入。"}),
                      headers={**AUTH, "content-type": "application/json"})
            assert r.status_code == 503, r.text
            error = r.json()["errors"][0]
            assert error["code"] == "documents.index_unavailable" and "read-only" in error["message"], error
            assert error["retryable"] is False and str(indexes) not in r.text
        r = callback(c, srv.base, ENV["ACME_SECRET"], query="第一篇文档")
        assert r.status_code == 200 and r.json()["Ret"] == 0 and r.json()["Result"], r.text
    assert "read-only index folder" in srv.logs() and str(indexes / "live") in srv.logs()
    assert IndexStore(indexes).open("live").get_document("new") is None


def test_a_full_disk_is_a_retryable_503_that_says_disk_full_and_loses_nothing(tmp_path: Path,
                                                                               redis_url: str) -> None:
    """On a real full filesystem (a tmpfs in the server's own mount namespace) a PUT was answered
    "index 'live' cannot be written", never saying why. Now: 503 documents.index_unavailable,
    retryable, "disk full"; with space again the same PUT is written."""
    from tests.support.full_disk import on_full_disk

    _seed(tmp_path / "seed")
    indexes, port = tmp_path / "indexes", free_port()
    cfg = _config(tmp_path, indexes, port, redis_url, workers=1)
    argv = on_full_disk(indexes, [*kbgate_argv(cfg, bind=f"127.0.0.1:{port}", workers=1)], seed=tmp_path / "seed")
    page = {"title": "满盘测试", "content": "磁盘写满时写入的文档。" * 200}
    with Server(argv, port, tmp_path / "serve.log", env=ENV) as srv, httpx.Client(base_url=srv.url) as c:
        r = c.put(f"{BASE}/documents/full-1", content=orjson.dumps(page),
                  headers={**AUTH, "content-type": "application/json"})
        assert r.status_code == 503, r.text
        [error] = r.json()["errors"]
        assert error["code"] == "documents.index_unavailable" and error["retryable"] is True
        assert "disk full" in error["message"] and "nothing was written" in error["message"], error
        assert srv.proc is not None
        (Path(f"/proc/{srv.proc.pid}/root") / str(indexes).lstrip("/") / "filler").unlink()  # space again
        assert _write(c, "PUT", f"{BASE}/documents/full-1", page)["documents"][0]["change"] == "added"
