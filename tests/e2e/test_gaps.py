"""Knowledge gaps and hit statistics end to end (a real `kbgate serve` with Redis): questions
that find nothing reach the gap view from every caller, grouped; filing twice makes one record;
the text is kept nowhere while admin.show_queries is off; served documents are counted.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import redis

from tests.support.callbacks import post as callback
from tests.support.configs import ADMIN_TOKEN, ENV, TOKEN_ALICE, every_caller, write
from tests.support.console import ENGLISH
from tests.support.harness import Server, bearer_json, free_port, serve
from tests.support.mcp_env import connect, payload

pytestmark = pytest.mark.anyio

GRANTS = ("knowledge.search", "search", "dify.retrieval", "mcp.search")
# Near-duplicates of one question nothing in the test index answers (tests.support.documents).
MISSES = {"volcengine": "火星基地的氧气配额是多少", "dify": "火星基地氧气配额是多少？",
          "mcp": "火星基地的氧气配额有多少", "agent": "火星基地的氧气配额是多少呢", "knowledge": "火星基地氧气配额多少"}
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(name="srv", scope="module")
def _srv(tmp_path_factory: pytest.TempPathFactory, docs_index: Path, redis_url: str) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("gaps")
    port = free_port()
    data = every_caller(root, docs_index, port=port, redis_url=redis_url, name="gaps", grants=GRANTS,
                        admin_token=ADMIN_TOKEN,
                        gaps={"flush_seconds": 0.1, "threshold": 0.0},  # "no hit" only: low scores in tests/ops
                        access={"sqlite_path": str(root / "feedback.sqlite3")})
    with serve(write(root / "gateway.toml", data), port=port, env=ENV) as s:
        s.root = root  # type: ignore[attr-defined]
        s.prefix = f"kbgate-gaps-{port}"  # type: ignore[attr-defined]
        yield s


def _bearer(srv: Server, path: str, body: dict[str, Any]) -> Any:
    return bearer_json(srv.base + path, TOKEN_ALICE, body)


async def _ask_every_caller(srv: Server, questions: dict[str, str]) -> None:
    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        env = orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query=questions["volcengine"]).content)
    assert env["Ret"] == 0 and env["Result"] == [], env
    dify = _bearer(srv, "/dify/retrieval", {"knowledge_id": "support", "query": questions["dify"],
                                            "retrieval_setting": {"top_k": 3, "score_threshold": 0.0}})
    assert dify["records"] == []
    async with connect(srv.base + "/mcp", TOKEN_ALICE) as m:
        assert payload(await m.call_tool("search", {"query": questions["mcp"]}))["results"] == []
    tool = _bearer(srv, "/agent-access/v1/tools/search", {"caller": {"type": "agent"},
                                                          "input": {"query": questions["agent"]}})
    assert tool["data"]["results"] == []
    hints = _bearer(srv, "/agent-api/v1/workspaces/support/knowledge/search", {"query": questions["knowledge"]})
    assert hints["hints"] == []


def _groups(srv: Server, want: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        r = httpx.get(srv.base + "/admin/gaps.json", headers=ADMIN, timeout=5)
        assert r.status_code == 200, r.text
        groups: list[dict[str, Any]] = r.json()["groups"]
        if sum(g["count"] for g in groups) >= want or time.monotonic() > deadline:
            return groups
        time.sleep(0.1)


async def test_misses_of_every_caller_are_one_group_and_filing_twice_is_one_record(srv: Server) -> None:
    await _ask_every_caller(srv, MISSES)
    groups = _groups(srv, len(MISSES))
    assert len(groups) == 1, groups
    g = groups[0]
    assert (g["count"], g["no_answer"], g["low_score"]) == (5, 5, 0)
    # five wordings, one group, and one question: the index's analysis keys them by the same content words
    assert len(set(MISSES.values())) == 5 and g["questions"] == 1
    assert set(g["callers"]) == {"volcengine:acme", "dify:alice", "mcp:alice", "agent:alice", "knowledge:alice"}
    assert g["routes"] == {"acme/tech/software": 1, "support": 4}
    assert sum(g["days"].values()) == 5 and g["examples"] == [] and g["best_hits"] == []
    assert g["first_seen"] <= g["last_seen"]

    first = httpx.post(srv.base + "/admin/gaps/file", headers=ADMIN, json={"group": g["id"]}, timeout=10)
    second = httpx.post(srv.base + "/admin/gaps/file", headers=ADMIN, json={"group": g["id"]}, timeout=10)
    assert first.status_code == second.status_code == 200, (first.text, second.text)
    a, b = first.json(), second.json()
    assert a["recordId"] == b["recordId"] and (a["deduped"], b["deduped"]) == (False, True)
    db = sqlite3.connect(srv.root / "feedback.sqlite3")  # type: ignore[attr-defined]
    try:
        rows = db.execute("SELECT dedupe_key, count, body FROM records WHERE kind = 'improvement_task'").fetchall()
    finally:
        db.close()
    assert len(rows) == 1 and rows[0][0] == f"gap:{g['id']}" and rows[0][1] == 2
    assert not any(q in rows[0][2] for q in MISSES.values())  # show_queries off: no text as evidence


async def test_question_text_is_kept_nowhere_when_show_queries_is_off(srv: Server, redis_url: str) -> None:
    secret = {k: v.replace("火星", "木卫二") for k, v in MISSES.items()}
    await _ask_every_caller(srv, secret)
    _groups(srv, 10)
    r = redis.Redis.from_url(redis_url)
    try:
        dumped = b"".join(orjson.dumps([k.decode(), str(r.dump(k))])
                          for k in r.scan_iter(f"{srv.prefix}:*"))  # type: ignore[attr-defined]
        assert not list(r.scan_iter(f"{srv.prefix}:gaps:x:*"))  # type: ignore[attr-defined]
    finally:
        r.close()
    shown = httpx.get(srv.base + "/admin/gaps", headers=ADMIN).text + httpx.get(srv.base + "/metrics").text
    log = Path(srv.log_path).read_text("utf-8")
    for q in secret.values():
        for where in (dumped.decode("utf-8", "replace"), shown, log):
            assert q not in where and "木卫二" not in where


async def test_served_documents_are_counted_and_the_rest_listed_as_never_served(srv: Server) -> None:
    before = httpx.get(srv.base + "/admin/documents.json", headers=ADMIN).json()["indexes"]["docs"]
    with httpx.Client(timeout=10, headers=ENGLISH) as c:
        env = orjson.loads(callback(c, srv.base, ENV["ACME_SECRET"], query="重放攻击的随机串能用几次", limit=1).content)
    assert env["Result"][0]["Id"] == "guide/replay.md"
    deadline = time.monotonic() + 10
    while True:
        docs = httpx.get(srv.base + "/admin/documents.json", headers=ADMIN).json()["indexes"]["docs"]
        if docs["served"].get("guide/replay.md", 0) > before["served"].get("guide/replay.md", 0):
            break
        assert time.monotonic() < deadline, docs
        time.sleep(0.1)
    assert docs["served"]["guide/replay.md"] == before["served"].get("guide/replay.md", 0) + 1
    assert "guide/replay.md" not in docs["never"] and "long/manual.md" in docs["never"]
    assert docs["documents"] == len(docs["never"]) + len(docs["served"])


async def test_prometheus_counts_questions_by_route_and_outcome(srv: Server) -> None:
    text = httpx.get(srv.base + "/metrics").text
    assert 'kbgate_questions_total{outcome="no_answer",route="acme/tech/software"}' in text
    assert 'kbgate_questions_total{outcome="no_answer",route="support"}' in text


async def test_the_cli_lists_the_group_and_files_it_as_the_button_does(srv: Server) -> None:
    from tests.support.harness import kbgate

    before = {g["id"]: g["count"] for g in _groups(srv, 0)}
    await _ask_every_caller(srv, {k: "南极企鹅的冬季迁徙路线" + "？" * n for n, k in enumerate(MISSES)})
    [group] = [g for g in _groups(srv, sum(before.values()) + 5) if g["id"] not in before]
    env = {**ENV, "KBGATE_ADMIN_TOKEN": ADMIN_TOKEN}
    listed = kbgate("gaps", "--url", srv.base, env=env)
    assert listed.returncode == 0, listed.stderr
    assert group["id"][:12] in listed.stdout and "volcengine:acme" in listed.stdout
    filed = [kbgate("gaps", "--url", srv.base, "--file", group["id"][:12], env=env) for _ in range(2)]
    assert [f.returncode for f in filed] == [0, 0], [f.stderr for f in filed]
    assert " created for group " in filed[0].stdout and "updated (count 2)" in filed[1].stdout
    assert "火星" not in listed.stdout and "企鹅" not in listed.stdout
    nobody = kbgate("gaps", "--url", srv.base, env={**ENV, "KBGATE_ADMIN_TOKEN": "wrong-token-0123456789abc"})
    assert nobody.returncode != 0 and "401" in nobody.stderr
    docs = kbgate("documents", "--url", srv.base, env=env)
    assert docs.returncode == 0 and "index docs:" in docs.stdout and "never served" in docs.stdout


async def test_filing_a_group_by_fewer_than_8_characters_asks_for_8(srv: Server) -> None:
    # Six characters got "404 no such gap group (it may have expired)", as if the group were gone.
    from tests.support.harness import kbgate

    await _ask_every_caller(srv, {k: "北极熊的夏季食谱" + "！" * n for n, k in enumerate(MISSES)})
    group = _groups(srv, 1)[0]
    env = {**ENV, "KBGATE_ADMIN_TOKEN": ADMIN_TOKEN}
    short = kbgate("gaps", "--url", srv.base, "--file", group["id"][:6], env=env)
    assert short.returncode == 2, short.stdout + short.stderr
    assert "at least its first 8 characters" in short.stderr and "no such gap group" not in short.stderr
    r = httpx.post(srv.base + "/admin/gaps/file", headers=ADMIN, json={"group": group["id"][:6]}, timeout=10)
    assert r.status_code == 400 and "at least its first 8 characters" in r.json()["error"]
