"""gateway/agent/feedback: the IssueTracker contract for both adapters (SQLite, and GitHub
behind a stateful respx fake), and the FeedbackBridge over a real Redis: dedupe,
idempotency, conflicts, failures, and parallel writes that must file exactly once."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import respx

from gateway.agent.feedback import FeedbackBridge, IssueDraft, IssueTracker
from gateway.agent.feedback.bridge import draft_for
from gateway.agent.feedback.github import GitHubTracker
from gateway.agent.feedback.sqlite import SqliteTracker
from gateway.agent.idempotency import IdempotencyStore, canonical_dedupe_key, canonical_hash
from gateway.core.clock import FixedClock
from gateway.core.errors import ToolError
from gateway.core.types import Secret

NOW = 1_777_000_000.0
FEEDBACK = {"kind": "no_answer", "message": "搜索“密钥轮换”没有找到答案", "question": "如何轮换密钥"}


class FakeGitHub:
    """A tiny stateful GitHub Issues: POST files an issue (after `delay`), search finds
    issues whose body holds the searched hex. Counts POSTs."""

    def __init__(self, delay: float = 0.0) -> None:
        self.issues: list[dict[str, Any]] = []
        self.posts = 0
        self.delay = delay

    async def post(self, request: httpx.Request) -> httpx.Response:
        self.posts += 1
        await asyncio.sleep(self.delay)
        data = json.loads(request.content)
        n = len(self.issues) + 1
        issue = {"number": n, "html_url": f"https://github.com/acme/kb/issues/{n}",
                 "title": data["title"], "body": data["body"], "labels": data.get("labels", []),
                 "created_at": "2026-05-01T08:30:00Z", "state": "open"}
        self.issues.append(issue)
        return httpx.Response(201, json=issue)

    def search(self, request: httpx.Request) -> httpx.Response:
        m = re.search(r'"([0-9a-f]{32})"', request.url.params["q"])
        assert m is not None
        items = [i for i in self.issues if m.group(1) in i["body"]]
        return httpx.Response(200, json={"total_count": len(items), "incomplete_results": False, "items": items})


@pytest.fixture(name="github")
def _github() -> Iterator[FakeGitHub]:
    fake = FakeGitHub()
    with respx.mock(base_url="https://api.github.com", assert_all_called=False) as mock:
        mock.post("/repos/acme/kb/issues").mock(side_effect=fake.post)
        mock.get("/search/issues").mock(side_effect=fake.search)
        yield fake


@pytest.fixture(name="tracker", params=["sqlite", "github"])
async def _tracker(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[IssueTracker]:
    clock = FixedClock(NOW)
    t: IssueTracker
    if request.param == "sqlite":
        t = SqliteTracker(tmp_path / "feedback.sqlite3", clock)
    else:
        request.getfixturevalue("github")
        t = GitHubTracker(repo="acme/kb", token=Secret("ghp_x" * 8), map_path=tmp_path / "map.sqlite3", clock=clock)
    yield t
    await t.close()


@pytest.fixture(name="store")
async def _store(redis_url: str, key_prefix: str) -> AsyncIterator[IdempotencyStore]:
    client = aioredis.Redis.from_url(redis_url)
    yield IdempotencyStore(client, key_prefix, pending_ttl=5)
    await client.aclose()


DRAFT = IssueDraft("feedback", "sha256:k-0001", "[kbgate feedback: no_answer] q", "body", ("kbgate",))


# ------------------------------------------------------------------ the tracker contract, both adapters


@pytest.mark.anyio
async def test_tracker_create_then_find(tracker: IssueTracker) -> None:
    assert await tracker.find("feedback", "sha256:k-0001") is None
    made = await tracker.create(DRAFT)
    found = await tracker.find("feedback", "sha256:k-0001")
    assert found is not None and found.record_id == made.record_id and found.count == 1
    assert made.record_id.startswith("fb_")
    assert await tracker.find("improvement_task", "sha256:k-0001") is None  # kinds are separate


@pytest.mark.anyio
async def test_tracker_bump_counts(tracker: IssueTracker) -> None:
    await tracker.create(DRAFT)
    assert await tracker.bump("feedback", "sha256:k-0001") == 2
    assert await tracker.bump("feedback", "sha256:k-0001") == 3
    found = await tracker.find("feedback", "sha256:k-0001")
    assert found is not None and found.count == 3
    assert await tracker.bump("feedback", "sha256:nothing") is None


@pytest.mark.anyio
async def test_tracker_public_view_hides_private_fields(tracker: IssueTracker) -> None:
    made = await tracker.create(DRAFT)
    assert made.private  # the adapter keeps its own fields…
    pub = made.public()
    assert set(pub) == {"recordId", "kind", "state", "createdAt"}  # …but never shows them
    assert not set(map(str, made.private.values())) & set(map(str, pub.values()))


@pytest.mark.anyio
async def test_sqlite_create_twice_keeps_one_row(tmp_path: Path) -> None:
    t = SqliteTracker(tmp_path / "f.sqlite3", FixedClock(NOW))
    a, b = await asyncio.gather(t.create(DRAFT), t.create(DRAFT))
    assert a.private["rowid"] == b.private["rowid"]
    assert (await t.find("feedback", "sha256:k-0001")) is not None


def _first_calls(path: str, start: Any, out: Any) -> None:
    """One worker process's first calls to a new store file (`test_sqlite_first_calls_…`)."""
    tracker = SqliteTracker(Path(path), FixedClock(NOW))
    start.wait()
    try:
        asyncio.run(tracker.create(DRAFT))
        out.put("ok")
    except ToolError as exc:
        out.put(getattr(exc, "problem", str(exc)))


def test_sqlite_first_calls_of_several_workers_at_once_all_succeed(tmp_path: Path) -> None:
    # Workers are processes: a lock in one does not hold the others, and SQLite refuses a second
    # journal-mode switch of a new file at once ("database is locked") without waiting.
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    got: list[str] = []
    for n in range(40):
        path = str(tmp_path / f"r{n}" / "f.sqlite3")
        start, out = ctx.Barrier(4), ctx.Queue()
        workers = [ctx.Process(target=_first_calls, args=(path, start, out)) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(30)
        got += [out.get(timeout=5) for _ in workers]
    assert got == ["ok"] * 160


# ------------------------------------------------------------------ the bridge


def submit_args(tool: str = "create_feedback", caller: str = "bot-a", idem: str | None = "idem-0001",
                payload: dict[str, Any] | None = None, dedupe: str | None = None) -> dict[str, Any]:
    payload = payload or FEEDBACK
    dedupe = dedupe or canonical_dedupe_key(tool, payload)
    return {"tool": tool, "caller_id": caller, "idempotency_key": idem, "dedupe_key": dedupe,
            "payload_hash": canonical_hash({"input": payload, "dedupeKey": dedupe}), "payload": payload}


@pytest.mark.anyio
async def test_bridge_creates_then_dedupes_across_callers(tracker: IssueTracker, store: IdempotencyStore) -> None:
    bridge = FeedbackBridge(store, tracker)
    first = await bridge.submit(**submit_args())
    assert (first.deduped, first.replayed, first.data["count"]) == (False, False, 1)
    second = await bridge.submit(**submit_args(caller="bot-b", idem="idem-0002"))
    assert second.deduped and second.data["count"] == 2
    assert second.data["recordId"] == first.data["recordId"]
    found = await tracker.find("feedback", submit_args()["dedupe_key"])
    assert found is not None and found.count == 2  # the tracker's count follows


@pytest.mark.anyio
async def test_bridge_replays_same_key_same_payload(tracker: IssueTracker, store: IdempotencyStore) -> None:
    bridge = FeedbackBridge(store, tracker)
    first = await bridge.submit(**submit_args())
    again = await bridge.submit(**submit_args())
    assert again.data == first.data and again.replayed and not again.deduped


@pytest.mark.anyio
async def test_bridge_conflict_same_key_other_payload(tracker: IssueTracker, store: IdempotencyStore) -> None:
    bridge = FeedbackBridge(store, tracker)
    await bridge.submit(**submit_args())
    other = dict(FEEDBACK, message="另一条反馈")
    with pytest.raises(ToolError) as e:
        await bridge.submit(**submit_args(payload=other))
    assert e.value.code == "access.idempotency_conflict" and e.value.status == 409


@pytest.mark.anyio
async def test_bridge_finds_tracker_record_after_redis_forgot(tracker: IssueTracker, redis_url: str,
                                                              key_prefix: str, store: IdempotencyStore) -> None:
    await FeedbackBridge(store, tracker).submit(**submit_args())
    client = aioredis.Redis.from_url(redis_url)
    fresh = IdempotencyStore(client, key_prefix + "-after-retention")  # the Redis records expired
    later = await FeedbackBridge(fresh, tracker).submit(**submit_args(caller="bot-b", idem="idem-0003"))
    await client.aclose()
    assert later.deduped and later.data["count"] == 2


@pytest.mark.anyio
async def test_bridge_failure_abandons_so_a_retry_can_write(tmp_path: Path, store: IdempotencyStore) -> None:
    class Flaky(SqliteTracker):
        fail = True

        async def create(self, draft: IssueDraft):  # type: ignore[no-untyped-def]
            if self.fail:
                raise ToolError("access.tool_failed", "tracker down", retryable=True)
            return await super().create(draft)

    t = Flaky(tmp_path / "f.sqlite3", FixedClock(NOW))
    bridge = FeedbackBridge(store, t)
    with pytest.raises(ToolError) as e:
        await bridge.submit(**submit_args())
    assert e.value.retryable
    t.fail = False
    ok = await bridge.submit(**submit_args())
    assert ok.data["count"] == 1 and not ok.deduped


@pytest.mark.anyio
async def test_parallel_submits_file_exactly_once_sqlite(tmp_path: Path, store: IdempotencyStore) -> None:
    t = SqliteTracker(tmp_path / "f.sqlite3", FixedClock(NOW))
    bridge = FeedbackBridge(store, t)
    results = await asyncio.gather(*[bridge.submit(**submit_args(caller=f"bot-{i}", idem=f"idem-{i:04d}"))
                                     for i in range(25)])
    assert len({r.data["recordId"] for r in results}) == 1
    assert sorted(r.data["count"] for r in results) == list(range(1, 26))
    assert [r.deduped for r in results].count(False) == 1
    found = await t.find("feedback", submit_args()["dedupe_key"])
    assert found is not None and found.count == 25


@pytest.mark.anyio
async def test_parallel_submits_post_once_to_github(tmp_path: Path, store: IdempotencyStore) -> None:
    fake = FakeGitHub(delay=0.1)
    with respx.mock(base_url="https://api.github.com", assert_all_called=False) as mock:
        mock.post("/repos/acme/kb/issues").mock(side_effect=fake.post)
        mock.get("/search/issues").mock(side_effect=fake.search)
        t = GitHubTracker(repo="acme/kb", token=Secret("ghp_x" * 8), map_path=tmp_path / "m.sqlite3")
        bridge = FeedbackBridge(store, t)
        results = await asyncio.gather(*[bridge.submit(**submit_args(caller=f"bot-{i}", idem=f"idem-{i:04d}"))
                                         for i in range(10)])
        await t.close()
    assert fake.posts == 1 and len(fake.issues) == 1
    assert len({r.data["recordId"] for r in results}) == 1


def test_draft_for_feedback_and_task() -> None:
    d = draft_for("create_feedback", "sha256:x", FEEDBACK, "bot-a", ("kbgate",))
    assert d.kind == "feedback" and d.labels == ("kbgate", "feedback", "no-answer")
    assert "如何轮换密钥" in d.title and "bot-a" in d.body
    task = {"goal": "补充密钥轮换文档", "scope": {"paths": ["docs/security/**"]},
            "evidence": [{"question": "如何轮换密钥", "citation": {"docId": "kb-1", "title": "t", "path": "docs/a.md",
                                                                  "route": "docs", "revision": "r"}}]}
    t = draft_for("create_improvement_task", "sha256:y", task, "bot-a")
    assert t.kind == "improvement_task" and "improvement-task" in t.labels
    assert "docs/security/**" in t.body and "kb-1" in t.body and "not executed" in t.body
