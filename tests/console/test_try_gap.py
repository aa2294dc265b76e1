"""gateway.console.try_gap and the gap pages through the app: a try from a gap group by its id,
with and without kept question text, whether a typed question belongs to the group, an owner of
another index refused the group, and who reads a group's question text (admins and the owners of
its index; a viewer and another index's owner never)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from tests.console.test_users import OWNER, VIEWER, _hash, users_config
from tests.support.configs import ADMIN_TOKEN, ENV, TOKEN_ALICE, write

pytestmark = pytest.mark.anyio
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
MISSED = "火星基地的氧气配额是多少"
KB_OWNER = "kim-credential-0123456789abcdef"
KIM = {"authorization": f"Bearer kim:{KB_OWNER}"}
VERA = {"authorization": f"Bearer vera:{VIEWER}"}
OTTO = {"authorization": f"Bearer otto:{OWNER}"}


async def _app_with_gap(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch, *,
                        keep: bool, query: str = MISSED) -> tuple[Any, str]:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    data = users_config(tmp_path, docs_index, audit={"sink": "off"})
    data["gaps"]["flush_seconds"] = 0.05
    data["gaps"]["keep_text"] = keep
    data["admin"]["users"]["kim"] = {"role": "owner", "indexes": ["kb"], "credential": _hash(KB_OWNER)}
    c, _, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                     json={"knowledge_id": "other", "query": query,
                           "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
    assert r.json()["records"] == []
    for _ in range(100):
        groups = (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"]
        if groups:
            return c, groups[0]["id"]
        await asyncio.sleep(0.05)
    raise AssertionError("no gap recorded")


async def test_with_texts_kept_the_groups_question_is_tried_at_once(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _app_with_gap(tmp_path, docs_index, start_app, monkeypatch, keep=True)
    page = (await c.get(f"/admin/try?gap={gid}", headers=ADMIN)).text
    assert "Its newest question is tried below." in page and MISSED in page
    assert 'name="a_caller"' in page and '<option value="dify" selected>' in page and 'value="other"' in page
    assert 'data-gap="yes"' in page and "a gap (no hit)" in page
    owner = (await c.get(f"/admin/try?gap={gid}", headers={"authorization": f"Bearer otto:{OWNER}"})).text
    assert "No such gap group" in owner and MISSED not in owner  # otto owns docs, the gap is kb's


async def test_without_texts_the_owner_types_it_and_is_told_whether_it_belongs(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, gid = await _app_with_gap(tmp_path, docs_index, start_app, monkeypatch, keep=False)
    page = (await c.get(f"/admin/try?gap={gid}", headers=ADMIN)).text
    assert "gaps.keep_text = false" in page and "火星" not in page and 'class="member"' not in page
    form = {"gap": gid, "a_caller": "dify", "a_client": "alice", "a_route": "other"}
    same = (await c.post("/admin/try", headers=ADMIN, data={**form, "query": "火星基地氧气配额是多少？"})).text
    assert 'data-member="yes"' in same
    other = (await c.post("/admin/try", headers=ADMIN, data={**form, "query": "木星探测器的燃料"})).text
    assert 'data-member="no"' in other


async def test_the_index_owner_and_admins_read_the_question_masked_others_never(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    asked = "火星基地的氧气配额是多少，我的手机13812345678"
    c, gid = await _app_with_gap(tmp_path, docs_index, start_app, monkeypatch, keep=True, query=asked)
    kept = "火星基地的氧气配额是多少，我的手机[phone]"
    for who in (ADMIN, KIM):
        [g] = (await c.get("/admin/gaps.json", headers=who)).json()["groups"]
        assert g["examples"] == [kept]
        assert kept in (await c.get("/admin/gaps", headers=who)).text
        tried = (await c.get(f"/admin/try?gap={gid}", headers=who)).text
        assert f'value="{kept}"' in tried and 'data-member="yes"' in tried  # the masked text keys as kept
    [seen] = (await c.get("/admin/gaps.json", headers=VERA)).json()["groups"]  # a viewer sees the group...
    assert seen["id"] == gid and seen["examples"] == []  # ...never its text
    for who in (VERA, OTTO):  # otto owns docs, not kb: the group is not even shown to him
        for path in ("/admin/gaps", "/admin/gaps.json", f"/admin/try?gap={gid}", "/admin/tasks"):
            body = (await c.get(path, headers=who)).text
            assert "火星" not in body and "13812345678" not in body and "[phone]" not in body, path
    assert "not shown: only admins" in (await c.get("/admin/gaps", headers=VERA)).text


async def test_a_near_miss_says_why_it_missed_to_those_who_read_the_question(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A low score: the near miss keeps the threshold it was judged under and the question's words
    the page lacks (words of the question: for admins and the index's owners only)."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    data = users_config(tmp_path, docs_index, audit={"sink": "off"})
    data["gaps"].update(flush_seconds=0.05, threshold=0.99)
    data["admin"]["users"]["kim"] = {"role": "owner", "indexes": ["kb"], "credential": _hash(KB_OWNER)}
    c, _, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                     json={"knowledge_id": "other", "query": "密钥轮换的报销审批",
                           "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
    assert r.json()["records"], r.text  # answered, but under the 0.99 gap threshold
    for _ in range(100):
        if groups := (await c.get("/admin/gaps.json", headers=ADMIN)).json()["groups"]:
            break
        await asyncio.sleep(0.05)
    [g] = groups
    best = g["best_hits"][0]
    assert best["doc_id"] == "kb-1" and best["threshold"] == 0.99 and best["relevance"] < 0.99
    assert "报销" in best["unmatched"] and "密钥" not in best["unmatched"]
    page = (await c.get("/admin/gaps", headers=KIM)).text
    assert "under the gap threshold 0.990" in page and "报销" in page
    [seen] = (await c.get("/admin/gaps.json", headers=VERA)).json()["groups"]
    assert "unmatched" not in seen["best_hits"][0] and "报销" not in (await c.get("/admin/gaps", headers=VERA)).text


async def test_a_question_the_floor_left_unanswered_names_its_nearest_page_and_the_floor(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    data = users_config(tmp_path, docs_index, audit={"sink": "off"})
    data["gaps"]["flush_seconds"] = 0.05
    data["agent"]["routes"]["other"]["relevance_floor"] = 0.95
    data["admin"]["users"]["kim"] = {"role": "owner", "indexes": ["kb"], "credential": _hash(KB_OWNER)}
    c, _, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                     json={"knowledge_id": "other", "query": "密钥轮换的报销审批",
                           "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
    assert r.json()["records"] == [], r.text  # the page is there, under the route's floor
    for _ in range(100):
        if groups := (await c.get("/admin/gaps.json", headers=KIM)).json()["groups"]:
            break
        await asyncio.sleep(0.05)
    [g] = groups
    assert g["best_hits"] == [] and g["no_answer"] == 1
    near = g["near_misses"][0]
    assert (near["doc_id"], near["why"], near["floor"]) == ("kb-1", "floor", 0.95) and "报销" in near["unmatched"]
    page = (await c.get("/admin/gaps", headers=KIM)).text
    assert "under the route's floor 0.950; words it lacks: 报销" in page and 'data-why="floor"' in page


def test_an_owner_reads_only_the_texts_asked_of_an_index_they_own(tmp_path: Path, docs_index: Path) -> None:
    """A group joins near-duplicates across indexes: kim (kb) reads the wording asked of kb, otto
    (docs) the one asked of docs, an admin both, a viewer none."""
    from collections import Counter

    from gateway.console.gaps.groups import Question, group
    from gateway.console.gaps.owners import visible_groups
    from gateway.console.users import ConsoleUser
    from tests.support.configs import parse

    cfg = parse(users_config(tmp_path, docs_index), tmp_path)
    terms = ("t1", "t2", "t3", "t4")
    asked = [Question("a" * 32, terms, 1, 1, 0, 1.0, 1.0, routes=Counter({"other": 1}), examples=["问在kb"]),
             Question("b" * 32, terms[:3], 1, 1, 0, 2.0, 2.0, routes=Counter({"support": 1}), examples=["问在docs"])]
    assert len(group(asked)) == 1  # one group of two questions
    for user, texts in ((ConsoleUser("kim", "owner", frozenset({"kb"})), ["问在kb"]),
                        (ConsoleUser("otto", "owner", frozenset({"docs"})), ["问在docs"]),
                        (ConsoleUser("admin", "admin"), ["问在docs", "问在kb"]),
                        (ConsoleUser("vera", "viewer"), [])):
        [g], _ = visible_groups(user, group(asked), cfg)
        assert g.examples == texts, user.name
