"""The Summary holds the answer, on every caller: a real `kbgate serve` (hybrid, the default) asked
through a signed Volcengine callback, the knowledge protocol, the tool API, Dify's External
Knowledge API (a route that sets summary_chars answers with the snippet) and the MCP server; each
first result's snippet (Summary, summary, snippet, content, text) is the passage that answers."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import anyio
import httpx
import orjson
import pytest

from tests.support import harness
from tests.support.callbacks import post
from tests.support.configs import ACME_KEYS, ENV, EVERYTHING, SECRET_ACME, TOKEN_ALICE, client, config, tenant, write
from tests.support.harness import free_port, serve
from tests.support.mcp_env import connect, payload
from tests.support.paths import ROOT, corpora_or_skip

# A four-section policy in one chunk (each section is short): the question's words sit in every
# section, the answer in the last one, after its heading and in other words than the question's.
POLICY = """# 员工年休假制度

## 适用范围
本制度适用于公司全体正式员工，实习生和劳务派遣人员的年假另行约定。员工累计工作已满一年的，享受带薪年假。年假期间工资照常发放，不影响绩效考核，年假用完后的请假按事假处理。

## 年假天数
累计工作已满1年不满10年的，年假5天；已满10年不满20年的，年假10天；已满20年的，年假15天。国家法定休假日、休息日不计入年假天数。新入职员工当年的年假按剩余日历天数折算，不足1整天的部分不能用作年假。

## 申请流程
员工休年假应提前三个工作日在办公系统提交申请，写明起止日期和工作交接人。部门负责人在两个工作日内审批；连续休年假超过五天的，还需人力资源部备案。年假可以分段休，每段不少于半天。

## 未休年假的处理
当年度未休的年休假，经部门负责人批准可以顺延到下一年度第一季度内使用，逾期不再保留。因工作需要公司安排员工不休年假的，按员工日工资收入的百分之三百支付未休年假的工资报酬。
"""
ANNUAL_LEAVE = "年假没休完明年还能用吗"
ANNUAL_ANSWER = "顺延到下一年度第一季度内使用"

CMRC_QUESTION = "公园里有一座小型的火车博物馆是用来做什么的？"
CMRC_DOC = "cmrc-TRIAL_662"
CMRC_ANSWER = "展示泰国的机车及车厢"
CMRC_NEIGHBOURS = 40
"""Passages of cmrc2018 indexed beside the one that answers (the first N of the corpus)."""


@dataclass(frozen=True, slots=True)
class Snippets:
    """The first result's document and snippet on each caller."""

    volcengine: tuple[str, str]
    knowledge: tuple[str, str]
    tools: tuple[str, str]
    dify: tuple[str, str]
    mcp: tuple[str, str]


def site(tmp: Path, port: int) -> Path:
    """tmp/gateway.toml: tenant acme's route tech/docs and agent route support over index 'docs'
    (hybrid by default), support answering with snippets of search.summary_chars."""
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", "docs", "docs")])
    tools = ["knowledge.search", "search", "dify.retrieval", "mcp.search"]
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs", "summary_chars": 520}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support"], tools, **EVERYTHING)}}
    data = config(tmp, tenants=[acme], port=port, agent=agent, search={"relevance_floor": 0})
    return write(tmp / "gateway.toml", data)


async def _mcp_first(base: str, query: str) -> tuple[str, str]:
    async with connect(base + "/mcp", TOKEN_ALICE) as c:
        found = payload(await c.call_tool("search", {"query": query}))["results"]
    return str(found[0]["title"]), str(found[0]["text"])


def ask_everyone(base: str, query: str) -> Snippets:
    auth = {"authorization": f"Bearer {TOKEN_ALICE}", "content-type": "application/json"}
    with httpx.Client(timeout=60) as c:
        r = post(c, base, SECRET_ACME, second="docs", query=query, limit=5)
        assert r.status_code == 200 and orjson.loads(r.content)["Ret"] == 0, r.text
        first = orjson.loads(r.content)["Result"][0]
        volcengine = (str(first["Id"]).split("#")[0], str(first["Summary"]))
        r = c.post(f"{base}/agent-api/v1/workspaces/support/knowledge/search", headers=auth,
                   content=orjson.dumps({"query": query}))
        assert r.status_code == 200, r.text
        hint = r.json()["hints"][0]
        knowledge = (str(hint["title"]), str(hint["summary"]))
        r = c.post(f"{base}/agent-access/v1/tools/search", headers=auth,
                   content=orjson.dumps({"caller": {"type": "agent"}, "input": {"query": query}}))
        assert r.status_code == 200, r.text
        found = r.json()["data"]["results"][0]
        tools = (str(found["citation"]["docId"]), str(found["snippet"]))
        r = c.post(f"{base}/dify/retrieval", headers=auth, content=orjson.dumps(
            {"knowledge_id": "support", "query": query, "retrieval_setting": {"top_k": 5, "score_threshold": 0}}))
        assert r.status_code == 200, r.text
        record = r.json()["records"][0]
        dify = (str(record["metadata"]["document_id"]), str(record["content"]))
    return Snippets(volcengine, knowledge, tools, dify, anyio.run(_mcp_first, base, query))


def start(tmp: Path) -> harness.Server:
    port = free_port()
    cfg = site(tmp, port)
    built = harness.kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(tmp / "docs"),
                           env=ENV, timeout=300)
    assert built.returncode == 0, built.stderr
    return serve(cfg, port=port, env=ENV, cwd=ROOT)


def test_the_annual_leave_answer_is_in_every_callers_snippet(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "leave.md").write_text(POLICY, "utf-8")
    with start(tmp_path) as srv:
        got = ask_everyone(srv.base, ANNUAL_LEAVE)
    assert got.volcengine[0] == "leave.md" and got.tools[0] == "leave.md" and got.dify[0] == "leave.md"
    assert got.knowledge[0] == got.mcp[0] == "员工年休假制度"
    for caller, (_, snippet) in vars_of(got).items():
        assert ANNUAL_ANSWER in snippet, (caller, snippet)
        assert len(snippet) <= 520, caller


@pytest.mark.corpus
def test_a_cmrc2018_answer_outside_the_old_window_is_in_every_callers_snippet(tmp_path: Path) -> None:
    corpora = corpora_or_skip()
    lines = (corpora / "cmrc2018" / "docs.jsonl").read_text("utf-8").splitlines()
    wanted = [line for line in lines if json.loads(line)["id"] == CMRC_DOC]
    assert len(wanted) == 1
    kept = [line for line in lines[:CMRC_NEIGHBOURS] if line not in wanted] + wanted
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "cmrc.jsonl").write_text("\n".join(kept) + "\n", "utf-8")
    title = json.loads(wanted[0]).get("title", "")
    with start(tmp_path) as srv:
        got = ask_everyone(srv.base, CMRC_QUESTION)
    assert got.volcengine[0] == got.tools[0] == got.dify[0] == CMRC_DOC
    assert got.knowledge[0] == got.mcp[0] == (title or CMRC_DOC)
    for caller, (_, snippet) in vars_of(got).items():
        assert CMRC_ANSWER in snippet, (caller, snippet)


def vars_of(s: Snippets) -> dict[str, tuple[str, str]]:
    return {"volcengine": s.volcengine, "knowledge": s.knowledge, "tools": s.tools, "dify": s.dify, "mcp": s.mcp}
