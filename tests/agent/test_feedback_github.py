"""gateway/agent/feedback/github.py with respx against recorded GitHub response shapes
(tests/fixtures/github): 201, 403 rate limits, 410, 422, 5xx, search by marker."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from gateway.agent.feedback.github import GitHubTracker, marker_comment
from gateway.agent.feedback.tracker import IssueDraft
from gateway.core.clock import FixedClock
from gateway.core.errors import ToolError
from gateway.core.types import Secret
from tests.support.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "github"
API = "https://api.github.com"
TOKEN = "ghp_THISISNOTAREALTOKEN0123456789abcdef"
NOW = 1_777_000_000.0


def fixture(name: str, **replace: str) -> dict[str, Any]:
    text = (FIXTURES / name).read_text("utf-8")
    for k, v in replace.items():
        text = text.replace(k, json.dumps(v)[1:-1])
    data: dict[str, Any] = json.loads(text)
    return data


DRAFT = IssueDraft("feedback", "sha256:abc12345", "[kbgate feedback: no_answer] 如何轮换密钥", "**Kind:** no_answer",
                   ("kbgate", "feedback"))


@pytest.fixture(name="clock")
def _clock() -> FixedClock:
    return FixedClock(NOW)


@pytest.fixture(name="tracker")
async def _tracker(tmp_path: Path, clock: FixedClock) -> AsyncIterator[GitHubTracker]:
    t = GitHubTracker(repo="acme/kb-feedback", token=Secret(TOKEN), map_path=tmp_path / "map.sqlite3", clock=clock)
    yield t
    await t.close()


def search_hit(kind: str = "feedback", key: str = "sha256:abc12345") -> dict[str, Any]:
    return fixture("search_issues_200.json", MARKER=marker_comment(kind, key))


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_201_creates_issue_with_marker_and_labels(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    route = respx_mock.post("/repos/acme/kb-feedback/issues").respond(201, json=fixture("issue_created_201.json"))
    issue = await tracker.create(DRAFT)
    sent = json.loads(route.calls.last.request.content)
    assert sent["title"] == DRAFT.title and sent["labels"] == ["kbgate", "feedback"]
    assert sent["body"].startswith("**Kind:** no_answer")
    assert marker_comment("feedback", "sha256:abc12345") in sent["body"]
    req = route.calls.last.request
    assert req.headers["authorization"] == f"Bearer {TOKEN}"
    assert req.headers["x-github-api-version"] == "2022-11-28"
    assert issue.private == {"number": 42, "url": "https://github.com/acme/kb-feedback/issues/42"}
    assert issue.created_at == 1_777_624_200
    pub = issue.public()
    assert set(pub) == {"recordId", "kind", "state", "createdAt"}
    assert 42 not in pub.values() and "github" not in json.dumps(pub)


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_find_uses_local_map_before_search(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(201, json=fixture("issue_created_201.json"))
    search = respx_mock.get("/search/issues").respond(200, json={"total_count": 0, "items": []})
    await tracker.create(DRAFT)
    found = await tracker.find("feedback", "sha256:abc12345")
    assert found is not None and found.private["number"] == 42
    assert search.call_count == 0


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_find_by_hidden_marker_when_map_is_empty(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    search = respx_mock.get("/search/issues").respond(200, json=search_hit())
    found = await tracker.find("feedback", "sha256:abc12345")
    assert found is not None and found.private["number"] == 42
    q = search.calls.last.request.url.params["q"]
    assert "repo:acme/kb-feedback" in q and "in:body" in q
    # now mapped locally: no second search
    assert await tracker.find("feedback", "sha256:abc12345") is not None
    assert search.call_count == 1


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_search_hit_without_exact_marker_is_not_ours(respx_mock: respx.MockRouter,
                                                           tracker: GitHubTracker) -> None:
    respx_mock.get("/search/issues").respond(200, json=search_hit(key="sha256:someone-else"))
    assert await tracker.find("feedback", "sha256:abc12345") is None


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_403_secondary_limit_honours_retry_after(respx_mock: respx.MockRouter, tracker: GitHubTracker,
                                                       clock: FixedClock) -> None:
    route = respx_mock.post("/repos/acme/kb-feedback/issues").mock(side_effect=[
        httpx.Response(403, json=fixture("secondary_rate_limit_403.json"), headers={"retry-after": "30"}),
        httpx.Response(201, json=fixture("issue_created_201.json")),
    ])
    with pytest.raises(ToolError) as e:
        await tracker.create(DRAFT)
    assert (e.value.code, e.value.retryable, e.value.retry_after) == ("access.tool_failed", True, 30.0)
    clock.advance(29)
    with pytest.raises(ToolError) as e2:  # blocked: fails fast, GitHub not called again
        await tracker.create(DRAFT)
    assert e2.value.retryable and e2.value.retry_after == pytest.approx(1.0)
    assert route.call_count == 1
    clock.advance(2)
    assert (await tracker.create(DRAFT)).private["number"] == 42
    assert route.call_count == 2


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_403_secondary_limit_without_headers_waits_a_minute(respx_mock: respx.MockRouter,
                                                                  tracker: GitHubTracker) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(403, json=fixture("secondary_rate_limit_403.json"))
    with pytest.raises(ToolError) as e:
        await tracker.create(DRAFT)
    assert e.value.retryable and e.value.retry_after == 60.0


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_403_primary_limit_blocks_until_reset(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    respx_mock.get("/search/issues").respond(403, json=fixture("primary_rate_limit_403.json"), headers={
        "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000",
        "x-ratelimit-reset": str(int(NOW) + 600), "x-ratelimit-resource": "search"})
    with pytest.raises(ToolError) as e:
        await tracker.find("feedback", "sha256:abc12345")
    assert e.value.retryable and e.value.retry_after == 600.0


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_success_with_no_remaining_quota_blocks_the_next_call(respx_mock: respx.MockRouter,
                                                                    tracker: GitHubTracker) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(201, json=fixture("issue_created_201.json"), headers={
        "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 120)})
    search = respx_mock.get("/search/issues").respond(200, json={"total_count": 0, "items": []})
    await tracker.create(DRAFT)
    with pytest.raises(ToolError) as e:
        await tracker.find("feedback", "sha256:other-key")
    assert e.value.retry_after == 120.0 and search.call_count == 0


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_403_without_rate_limit_is_not_retryable(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(403, json={
        "message": "Resource not accessible by personal access token", "status": "403"})
    with pytest.raises(ToolError) as e:
        await tracker.create(DRAFT)
    assert not e.value.retryable and e.value.retry_after is None


@pytest.mark.anyio
@pytest.mark.parametrize(("status", "answer", "said"), [(410, "issues_disabled_410.json", "disabled"),
                                                        (422, "validation_failed_422.json", "validation")])
@respx.mock(base_url=API, assert_all_called=False)
async def test_issues_disabled_or_a_validation_failure_is_final(respx_mock: respx.MockRouter, tracker: GitHubTracker,
                                                               status: int, answer: str, said: str) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(status, json=fixture(answer))
    with pytest.raises(ToolError) as e:
        await tracker.create(DRAFT)
    assert e.value.code == "access.tool_failed" and not e.value.retryable
    assert said in e.value.message


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_5xx_post_looks_marker_up_and_never_posts_twice(respx_mock: respx.MockRouter,
                                                               tracker: GitHubTracker) -> None:
    post = respx_mock.post("/repos/acme/kb-feedback/issues").respond(502, json=fixture("server_error_502.json"))
    search = respx_mock.get("/search/issues").respond(200, json=search_hit())
    issue = await tracker.create(DRAFT)  # the POST did succeed behind the 502
    assert issue.private["number"] == 42
    assert post.call_count == 1 and search.call_count == 1


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_5xx_post_not_found_fails_retryably_without_reposting(respx_mock: respx.MockRouter,
                                                                    tracker: GitHubTracker) -> None:
    post = respx_mock.post("/repos/acme/kb-feedback/issues").respond(503, json=fixture("server_error_502.json"))
    respx_mock.get("/search/issues").respond(200, json={"total_count": 0, "incomplete_results": False, "items": []})
    with pytest.raises(ToolError) as e:
        await tracker.create(DRAFT)
    assert e.value.retryable and post.call_count == 1


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_dropped_connection_on_post_is_treated_as_uncertain(respx_mock: respx.MockRouter,
                                                                  tracker: GitHubTracker) -> None:
    post = respx_mock.post("/repos/acme/kb-feedback/issues").mock(side_effect=httpx.ReadTimeout("slow"))
    search = respx_mock.get("/search/issues").respond(200, json=search_hit())
    assert (await tracker.create(DRAFT)).private["number"] == 42
    assert post.call_count == 1 and search.call_count == 1


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_5xx_on_search_is_retryable(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    respx_mock.get("/search/issues").respond(500, json=fixture("server_error_502.json"))
    with pytest.raises(ToolError) as e:
        await tracker.find("feedback", "sha256:abc12345")
    assert e.value.retryable


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_errors_never_carry_the_token_or_urls(respx_mock: respx.MockRouter, tracker: GitHubTracker) -> None:
    for status, body in ((410, "issues_disabled_410.json"), (422, "validation_failed_422.json"),
                         (403, "secondary_rate_limit_403.json")):
        respx_mock.post("/repos/acme/kb-feedback/issues").respond(status, json=fixture(body))
        with pytest.raises(ToolError) as e:
            await tracker.create(DRAFT)
        text = f"{e.value.message} {e.value!r}"
        assert TOKEN not in text and "github.com" not in text and "acme" not in text
        tracker._blocked_until = 0.0
    assert TOKEN not in repr(tracker.__dict__)


@pytest.mark.anyio
@respx.mock(base_url=API, assert_all_called=False)
async def test_bump_counts_locally_without_calling_github(respx_mock: respx.MockRouter,
                                                          tracker: GitHubTracker) -> None:
    respx_mock.post("/repos/acme/kb-feedback/issues").respond(201, json=fixture("issue_created_201.json"))
    await tracker.create(DRAFT)
    calls = len(respx_mock.calls)
    assert await tracker.bump("feedback", "sha256:abc12345") == 2
    assert await tracker.bump("feedback", "sha256:missing") is None
    assert len(respx_mock.calls) == calls
