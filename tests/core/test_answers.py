"""gateway/core/answers.py: the answer cache, through `retrieve.search` on a real Runtime and
real Tantivy indexes (the session's test index, or a private copy where a commit is made).

Index searches are counted by wrapping the opened index's own `answer` (the one call a search
makes into the index); lookups by the `AnswerLooked` events the metrics count."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gateway.core import retrieve
from gateway.core.answers import AnswerCache, AnswerKey, answer_bytes, normalize_query, where_key
from gateway.core.events import AnswerLooked
from gateway.core.runtime import Runtime
from gateway.core.scope import Grant, Principal, ScopeRequest, effective_scope
from indexes.store import IndexStore
from indexes.types import Document, Hit, MetaCondition, MetaFilter, SearchFilter, Section
from tests.support.configs import config, parse

P = Principal("agent_client", "tester")
Q = "密钥轮换 重放"  # public and internal documents, and the working draft when in scope


def scope(index: str = "docs", request: ScopeRequest | None = None, **grant: Any) -> Any:
    return effective_scope(P, ("r",), index, [Grant(**grant)], request or ScopeRequest())


def runtime(indexes: Path, tmp_path: Path, entries: int) -> Runtime:
    return Runtime(parse(config(tmp_path, tenants=[], indexes=indexes, search={"answer_cache_entries": entries}),
                         tmp_path))


class Spy:
    """Counts the searches that reach the index and the cache lookups told to the events."""

    def __init__(self, rt: Runtime, monkeypatch: pytest.MonkeyPatch, index: str = "docs") -> None:
        self.searches = 0
        self.lookups: list[str] = []
        idx = rt.index(index)
        answer = idx.answer

        def counted(*args: Any, **kw: Any) -> Any:
            self.searches += 1
            return answer(*args, **kw)

        monkeypatch.setattr(idx, "answer", counted)
        rt.events.subscribe(AnswerLooked, lambda e: self.lookups.append(e.outcome))


async def search(rt: Runtime, eff: Any = None, query: str = Q, limit: int = 10, **kw: Any) -> retrieve.Searched:
    kw.setdefault("summary_chars", 50)
    kw.setdefault("content_chars", 80)
    return await retrieve.search(rt, eff if eff is not None else scope(), query, limit, **kw)


@pytest.fixture(name="rt")
def _rt(docs_index: Path, tmp_path: Path) -> Runtime:
    return runtime(docs_index, tmp_path, 64)


@pytest.mark.anyio
async def test_a_repeat_is_answered_from_the_cache(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(rt, monkeypatch)
    first = await search(rt)
    again = await search(rt, query=f"  {Q}\n")  # the same question, other whitespace
    assert first.hits and again.hits == first.hits
    assert (first.cached, again.cached) == (False, True)
    assert spy.searches == 1 and spy.lookups == ["miss", "hit"]
    label = rt.index("docs").generation
    assert (await search(rt, with_generation=True)).generation == label == retrieve.generation(rt, scope())


@pytest.mark.anyio
async def test_a_caller_changing_its_hits_never_changes_the_cache(rt: Runtime) -> None:
    first = await search(rt)
    kept = list(first.hits)
    first.hits.clear()
    second = await search(rt)
    assert second.cached and second.hits == kept
    second.hits.append(second.hits[0])
    assert (await search(rt)).hits == kept
    with pytest.raises(dataclasses.FrozenInstanceError):
        second.hits[0].title = "changed"  # type: ignore[misc]


@pytest.mark.anyio
async def test_a_narrower_scope_never_sees_the_answer_of_a_wider_one(rt: Runtime,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    spy = Spy(rt, monkeypatch)
    working = scope(request=ScopeRequest(include_working_docs=True), include_working_docs=True)
    widest = await search(rt, working)
    assert "working/draft.md" in [h.doc_id for h in widest.hits]
    assert {h.dataset for h in widest.hits} == {"public", "internal"}
    default = await search(rt, scope())
    public = await search(rt, scope(datasets=("public",)))
    guide = await search(rt, scope(path_globs=("guide/**",)))
    asked = await search(rt, scope(request=ScopeRequest(path_globs=("ops/**",))))
    assert spy.searches == 5 and spy.lookups == ["miss"] * 5
    assert default.hits and all(not h.path.startswith("working/") for h in default.hits)
    assert public.hits and all(h.dataset == "public" for h in public.hits)
    assert guide.hits and all(h.path.startswith("guide/") for h in guide.hits)
    assert asked.hits and all(h.path.startswith("ops/") for h in asked.hits)
    # The same filter reached another way shares the entry (it sees exactly the same documents)...
    assert (await search(rt, scope(request=ScopeRequest(datasets=("public",))))).hits == public.hits
    # ...and the wider scope still gets its own, wider answer.
    assert (await search(rt, working)).hits == widest.hits
    assert spy.searches == 5 and spy.lookups[5:] == ["hit", "hit"]


@pytest.mark.parametrize("change", [
    {"limit": 2},
    {"where": MetaFilter(conditions=(MetaCondition("dataset", "is", "public"),))},
    {"summary_chars": 30},
    {"content_chars": 60},
    {"one_per_document": False},
    {"floor": 0.5},
])
@pytest.mark.anyio
async def test_every_other_argument_keeps_its_own_entry(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                                                       change: dict[str, Any]) -> None:
    spy = Spy(rt, monkeypatch)
    base = await search(rt)
    changed = await search(rt, **change)
    assert spy.searches == 2 and not changed.cached
    assert (await search(rt, **change)).hits == changed.hits and spy.searches == 2  # itself cached in turn
    if "where" in change:
        assert changed.hits and {h.dataset for h in changed.hits} == {"public"} != {h.dataset for h in base.hits}
    if "limit" in change:
        assert len(changed.hits) == 2 < len(base.hits)


@pytest.mark.anyio
async def test_a_commit_makes_old_answers_unreachable(private_index: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rt = runtime(private_index, tmp_path, 64)
    spy = Spy(rt, monkeypatch)
    before = await search(rt, query="部署")
    assert (await search(rt, query="部署")).cached and spy.searches == 1
    gen = rt.index("docs").generation
    changed = Document("ops/deploy.md", "部署与密钥", (Section("", "部署时改用密钥管理服务下发密钥。"),),
                       path="ops/deploy.md", dataset="public")
    IndexStore(private_index).create_or_open_for_write("docs").ingest([changed], progress=False)
    assert rt.index("docs").maybe_reload(force=True)  # what the server's next check does
    assert rt.index("docs").generation != gen
    after = await search(rt, query="部署")
    assert spy.searches == 2 and not after.cached
    deploy = [h for h in after.hits if h.doc_id == "ops/deploy.md"]
    assert deploy and "密钥管理服务" in deploy[0].content
    assert all("密钥管理服务" not in h.content for h in before.hits)


@pytest.mark.anyio
async def test_the_cache_is_bounded_least_recently_used_out_first(docs_index: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    rt = runtime(docs_index, tmp_path, 2)
    spy = Spy(rt, monkeypatch)
    for q in ("密钥", "部署", "密钥", "预算"):  # 密钥 used again, so 部署 is the oldest when 预算 comes
        await search(rt, query=q)
    cache = rt.answers()
    assert cache is not None and len(cache) == 2 and spy.searches == 3
    assert (await search(rt, query="密钥")).cached
    assert not (await search(rt, query="部署")).cached and spy.searches == 4


@pytest.mark.anyio
async def test_zero_entries_turns_it_off(docs_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rt = runtime(docs_index, tmp_path, 0)
    spy = Spy(rt, monkeypatch)
    assert rt.answers() is None
    assert (await search(rt)).hits == (await search(rt)).hits
    assert spy.searches == 2 and spy.lookups == []


@pytest.mark.anyio
async def test_a_config_reload_empties_the_cache_and_applies_its_size(rt: Runtime, docs_index: Path,
                                                                      tmp_path: Path) -> None:
    await search(rt)
    old = rt.answers()
    assert old is not None and len(old) == 1 and old.entries == 64
    rt.config = runtime(docs_index, tmp_path, 8).config  # what gateway.serve.reload swaps
    new = rt.answers()
    assert new is not None and new is not old and len(new) == 0 and new.entries == 8
    assert not (await search(rt)).cached
    rt.config = runtime(docs_index, tmp_path, 0).config
    assert rt.answers() is None and not (await search(rt)).cached


@pytest.mark.anyio
async def test_an_answer_the_index_says_not_to_reuse_is_not_stored(rt: Runtime,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    idx = rt.index("docs")
    answer = idx.answer

    def degraded(*args: Any, **kw: Any) -> tuple[list[Hit], int | None]:
        return answer(*args, **kw)[0], None  # what a hybrid index's lexical fallback answers

    monkeypatch.setattr(idx, "answer", degraded)
    await search(rt)
    assert not (await search(rt)).cached
    cache = rt.answers()
    assert cache is not None and len(cache) == 0


def test_keys_keep_the_type_of_metadata_values() -> None:
    def where(value: Any) -> MetaFilter:
        return MetaFilter(conditions=(MetaCondition("n", "=", value),))

    keys = {where_key(where(1)), where_key(where(1.0)), where_key(where(True)), where_key(where("1")),
            where_key(where((1,))), where_key(where((1.0,)))}
    assert len(keys) == 6 and where_key(None) is None
    assert where_key(where(1)) == where_key(where(1))
    assert where_key(MetaFilter("or", where(1).conditions)) != where_key(where(1))


def test_queries_are_normalized_only_in_their_whitespace() -> None:
    assert normalize_query(" 密钥\t轮换\u3000 TiDB\n") == "密钥 轮换 TiDB"
    assert normalize_query("ＴｉＤＢ") == "ＴｉＤＢ" and normalize_query("TiDB") != normalize_query("tidb")


def test_a_cache_holds_at_least_one_entry() -> None:
    with pytest.raises(ValueError):
        AnswerCache(0)
    told: list[tuple[str, str]] = []
    cache = AnswerCache(1, observe=lambda index, outcome: told.append((index, outcome)))
    key = AnswerKey("docs", 1, "q", 5, SearchFilter(), None, 200, 1500, True, 0.0)
    assert cache.get(key) is None
    cache.put(key, [])
    assert cache.get(key) == [] and told == [("docs", "miss"), ("docs", "hit")]
    cache.clear()
    assert len(cache) == 0



def _hit(doc: str, chars: int) -> Hit:
    return Hit(doc, doc, 0, "标题", "摘要", "文" * chars, 1.0)


def _key(query: str) -> AnswerKey:
    return AnswerKey("docs", 1, query, 5, SearchFilter(), None, 200, 1500, True, 0.0)


def test_the_byte_bound_evicts_least_recently_used_answers_whatever_their_count() -> None:
    big = [_hit("a", 4000), _hit("b", 4000)]  # two hits of 4,000 Chinese characters: ~16 KB
    size = answer_bytes(big)
    assert 16_000 <= size < 18_000  # CPython: 2 bytes a character, plus headers and overhead
    cache = AnswerCache(100, max_bytes=3 * size)
    for q in ("q1", "q2", "q3"):
        cache.put(_key(q), big)
    assert cache.get(_key("q1")) is not None  # q1 used again: q2 is now the oldest
    cache.put(_key("q4"), big)
    assert len(cache) == 3 and cache.get(_key("q2")) is None
    assert cache.bytes <= 3 * size
    cache.put(_key("huge"), [_hit("h", 30_000)])  # larger than the whole budget: not kept, nothing evicted
    assert cache.get(_key("huge")) is None and len(cache) == 3


def test_the_count_bound_still_holds_beside_the_byte_bound() -> None:
    cache = AnswerCache(2, max_bytes=1 << 20)
    for q in ("q1", "q2", "q3"):
        cache.put(_key(q), [_hit("a", 10)])
    assert len(cache) == 2 and cache.get(_key("q1")) is None and cache.get(_key("q3")) is not None


@pytest.mark.anyio
async def test_the_runtime_cache_takes_its_byte_bound_from_the_config(docs_index: Path, tmp_path: Path) -> None:
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=docs_index,
                              search={"answer_cache_entries": 16, "answer_cache_mib": 3}), tmp_path))
    cache = rt.answers()
    assert cache is not None and cache.entries == 16 and cache.max_bytes == 3 << 20
    await search(rt)
    assert 0 < cache.bytes < cache.max_bytes


@pytest.mark.anyio
async def test_a_folder_rebuilt_from_scratch_at_the_same_opstamp_is_not_answered_from_memory(
        tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "indexes"

    def build(text: str) -> None:
        shutil.rmtree(root / "docs", ignore_errors=True)  # docs/on-call.md's repair: a fresh folder
        IndexStore(root).create_or_open_for_write("docs").ingest(
            [Document("doc.md", "重建", (Section("", text),), path="doc.md", dataset="public")], progress=False)

    build("重建测试词 第一版")
    rt = runtime(root, tmp_path, 64)
    first = await search(rt, query="重建测试词")
    assert (await search(rt, query="重建测试词")).cached and "第一版" in first.hits[0].content
    gen = rt.index("docs").generation
    build("重建测试词 第二版")
    assert rt.index("docs").maybe_reload(force=True)  # what the server's next check does
    assert rt.index("docs").generation == gen  # the same opstamp: the generation alone cannot tell
    after = await search(rt, query="重建测试词")
    assert not after.cached and "第二版" in after.hits[0].content
