"""gateway/console/gaps: classification on the relevance scale, keyed hashes, near-duplicate groups,
the recorder's queue and flush, and both stores' bounds (real Redis; memory)."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.console.gaps.groups import group
from gateway.console.gaps.keys import normalized, question_key
from gateway.console.gaps.record import GapRecorder, classify
from gateway.console.gaps.states import GroupState
from gateway.console.gaps.store import DAY, GapStore, MemoryGapStore, RedisGapStore
from gateway.core.config import Config, GapsConfig
from gateway.core.events import Asker, SearchAnswered, Served
from gateway.core.types import Secret
from indexes.store import IndexStore
from tests.support.configs import config, parse

pytestmark = pytest.mark.anyio

NOW = 1_800_000_000.0
KEY = b"k" * 32
VOLC = Asker("volcengine", "acme", ("acme/tech/software",), "callback")


def _hit(relevance: float, doc: str = "a.md") -> Served:
    return Served("kb", doc, "A", doc, relevance, 1.0, "rev")


def _asked(query: str, *hits: Served, asker: Asker = VOLC, failed: bool = False) -> SearchAnswered:
    return SearchAnswered(asker, query, ("kb",), hits, failed)


@pytest.fixture(name="store", params=["memory", "redis"])
async def _store(request: pytest.FixtureRequest, redis_url: str, key_prefix: str) -> AsyncIterator[GapStore]:
    store: GapStore = MemoryGapStore() if request.param == "memory" else RedisGapStore(redis_url, key_prefix)
    yield store
    await store.close()


def _config(tmp_path: Path, *, show: bool = False, **gaps: object) -> Config:
    cfg = parse(config(tmp_path, show_queries=show, admin_token="admin-token-0123456789abcdefXYZ"), tmp_path)
    return dataclasses.replace(cfg, gaps=dataclasses.replace(GapsConfig(key=Secret("x" * 32)), **gaps))


class Clock:
    def __init__(self) -> None:
        self.t = NOW

    def __call__(self) -> float:
        return self.t


async def _asked_one_a_second(cfg: Config, store: GapStore, texts: tuple[str, ...]) -> tuple[GapRecorder, Clock]:
    """A recorder that observed `texts` one second apart and flushed; (it, its clock)."""
    clock = Clock()
    rec = GapRecorder(lambda: cfg, clock, store)
    for text in texts:
        rec.observe(_asked(text))
        clock.t += 1
    await rec.flush()
    return rec, clock


def test_no_hit_is_no_answer_and_a_best_hit_under_the_threshold_is_low_score() -> None:
    assert classify(_asked("q"), 0.3) == "no_answer"
    assert classify(_asked("q", _hit(0.29), _hit(0.1)), 0.3) == "low_score"
    assert classify(_asked("q", _hit(0.1), _hit(0.3)), 0.3) == "answered"


def test_a_route_threshold_overrides_the_default_and_several_routes_take_the_lowest() -> None:
    g = GapsConfig(threshold=0.3, thresholds={"support": 0.6, "ops": 0.2})
    assert g.threshold_of(("support",)) == 0.6 and g.threshold_of(("other",)) == 0.3
    assert g.threshold_of(("support", "ops")) == 0.2


def test_question_keys_are_keyed_and_ignore_case_width_punctuation_and_script() -> None:
    assert normalized("年假 怎么算？") == normalized("年假怎麼算") == "年假怎么算"
    assert question_key(KEY, "年假怎么算？").key == question_key(KEY, "年假 怎么算").key
    assert question_key(KEY, "年假怎么算").key != question_key(b"j" * 32, "年假怎么算").key
    assert "年假" not in repr(question_key(KEY, "年假怎么算"))


def test_near_duplicates_join_one_group_and_others_stay_apart() -> None:
    from gateway.console.gaps.groups import Question

    def q(text: str, first: float) -> Question:
        k = question_key(KEY, text)
        return Question(k.key, k.terms, count=1, no_answer=1, first=first, last=first)

    qs = [q("火星基地的氧气配额是多少", NOW + 5), q("火星基地氧气配额有多少", NOW), q("年假怎么算", NOW)]
    groups = group(qs)
    assert sorted(g.questions for g in groups) == [1, 2]
    mars = next(g for g in groups if g.questions == 2)
    assert mars.id == qs[1].key  # the member seen first names the group
    assert mars.count == 2


@pytest.fixture(name="kb_words")
def _kb_words(docs_index: Path) -> Iterator[Callable[[str, str], list[str]]]:
    """The recorder's `words`: the test index's own analysis of a question (a real index)."""
    store = IndexStore(docs_index)
    yield lambda index, query: [u.text for u in store.open(index).question(query).units]
    store.close()


def test_near_duplicates_are_one_question_through_the_index_analysis(kb_words: Callable[[str, str], list[str]]) -> None:
    def key(text: str) -> str:
        return question_key(KEY, text, kb_words("kb", text)).key

    # before: the normalized strings differ, so these were two questions of two groups
    assert question_key(KEY, "年假怎么休").key != question_key(KEY, "年假要怎么休").key
    assert key("年假怎么休") == key("年假要怎么休") == key("年假 怎么休？")
    assert key("年假怎么休") != key("年假怎么算")
    assert key("如何更换凭证") == key("凭证如何更换")  # word order does not split a group
    # a question of question words only has no content word: keyed by its normalized form
    assert kb_words("kb", "怎么办") == [] and key("怎么办") == question_key(KEY, "怎么办").key


def test_a_question_kept_under_the_old_key_joins_the_same_question_keyed_by_words(
        kb_words: Callable[[str, str], list[str]]) -> None:
    from gateway.console.gaps.groups import Question

    old = question_key(KEY, "年假怎么休")  # kept in Redis before the index's analysis was used
    new = question_key(KEY, "年假怎么休", kb_words("kb", "年假怎么休"))
    assert old.key != new.key and old.terms == new.terms
    [g] = group([Question(old.key, old.terms, count=3, first=NOW, last=NOW),
                 Question(new.key, new.terms, count=1, first=NOW + 9, last=NOW + 9)])
    assert g.id == old.key and g.count == 4  # the group and its filing keep their id


async def test_the_recorder_groups_wordings_by_the_index_analysis(tmp_path: Path, store: GapStore,
                                                                  kb_words: Callable[[str, str], list[str]]) -> None:
    cfg = _config(tmp_path)
    rec = GapRecorder(lambda: cfg, Clock(), store, words=kb_words)
    rec.observe(_asked("年假怎么休"))
    rec.observe(_asked("年假要怎么休"))
    rec.observe(_asked("年假怎么算"))
    await rec.flush()
    groups = group(await store.questions(cfg.gaps, NOW, with_examples=False))
    assert sorted((g.questions, g.count) for g in groups) == [(1, 1), (1, 2)]


async def test_the_recorder_counts_keeps_gaps_and_served_hits(tmp_path: Path, store: GapStore) -> None:
    cfg = _config(tmp_path)
    counted: list[tuple[str, str]] = []
    clock = Clock()
    rec = GapRecorder(lambda: cfg, clock, store, lambda r, o: counted.append((r, o)))
    rec.observe(_asked("年假怎么算"))
    rec.observe(_asked("年假 怎么算？", _hit(0.1, "leave.md")))
    rec.observe(_asked("年假怎么算", _hit(0.9, "leave.md")))  # answered: served, not a gap
    rec.observe(_asked("年假怎么算", asker=dataclasses.replace(VOLC, probe=True)))  # a try: ignored
    rec.observe(_asked("年假怎么算", failed=True))  # the index was down: not a gap of the knowledge
    await rec.flush()
    assert counted == [("acme/tech/software", "no_answer"), ("acme/tech/software", "low_score"),
                       ("acme/tech/software", "answered")]
    [g] = group(await store.questions(cfg.gaps, NOW, with_examples=True))
    assert (g.count, g.no_answer, g.low_score, g.questions) == (2, 1, 1, 1)
    assert g.callers == {"volcengine:acme": 2} and g.days == {"2027-01-15": 2}
    assert [h["doc_id"] for h in g.best] == ["leave.md"]
    assert g.examples == ["年假 怎么算？", "年假怎么算"]  # kept by default (gaps.keep_text), newest first
    assert await store.served("kb", ["2027-01-15"]) == {"leave.md": 2}


async def test_one_config_line_keeps_no_text_at_all(tmp_path: Path, store: GapStore) -> None:
    cfg = _config(tmp_path, keep_text=False)
    rec = GapRecorder(lambda: cfg, Clock(), store)
    rec.observe(_asked("年假怎么算"))
    await rec.flush()
    [g] = group(await store.questions(cfg.gaps, NOW, with_examples=True))
    assert g.count == 1 and g.examples == []
    if isinstance(store, RedisGapStore):
        assert await store.client.keys(f"{store.p}:gaps:[tx]:*") == []  # no text kept anywhere


async def test_identifiers_are_masked_before_the_text_is_stored(tmp_path: Path, store: GapStore,
                                                                redis_url: str, key_prefix: str) -> None:
    cfg = _config(tmp_path)
    rec = GapRecorder(lambda: cfg, Clock(), store)
    rec.observe(_asked("我的手机13812345678和身份证11010519491231002X怎么改"))
    await rec.flush()
    [g] = group(await store.questions(cfg.gaps, NOW, with_examples=True))
    assert g.examples == ["我的手机[phone]和身份证[id]怎么改"]
    if isinstance(store, RedisGapStore):  # nothing of the numbers is anywhere in Redis
        client = store.client
        for name in await client.keys(f"{key_prefix}:gaps:*"):
            kind = await client.type(name)
            raw = repr(await client.zrange(name, 0, -1) if kind == b"zset" else
                       await client.hgetall(name) if kind == b"hash" else await client.dump(name))
            assert "13812345678" not in raw and "11010519491231002X" not in raw


async def test_served_counts_split_the_top_answer_from_lower_ranks(tmp_path: Path, store: GapStore) -> None:
    """A document served at rank 5 is counted served, and top only when it was the first hit."""
    cfg = _config(tmp_path)
    rec = GapRecorder(lambda: cfg, Clock(), store)
    rec.observe(_asked("年假怎么算", _hit(0.9, "leave.md"), _hit(0.5, "travel.md")))
    rec.observe(_asked("出差怎么报销", _hit(0.9, "travel.md"), _hit(0.4, "a.md"), _hit(0.3, "b.md"),
                       _hit(0.2, "c.md"), _hit(0.1, "leave.md")))
    await rec.flush()
    day = ["2027-01-15"]
    assert await store.served("kb", day) == {"leave.md": 2, "travel.md": 2, "a.md": 1, "b.md": 1, "c.md": 1}
    assert await store.served("kb", day, top=True) == {"leave.md": 1, "travel.md": 1}


async def test_texts_are_bounded_in_count_and_time(tmp_path: Path, store: GapStore) -> None:
    cfg = _config(tmp_path, max_examples=2, query_retention_seconds=3600)
    rec, clock = await _asked_one_a_second(cfg, store, ("年假怎么算", "年假怎么算?", "年假怎么算！"))
    [g] = group(await store.questions(cfg.gaps, clock.t, with_examples=True))
    assert g.examples == ["年假怎么算！", "年假怎么算?"]  # newest first, at most max_examples
    [old] = group(await store.questions(cfg.gaps, clock.t + 3601, with_examples=True))
    assert old.examples == [] and old.count == 3  # past the retention: counts stay, text is gone


async def test_text_older_than_keep_days_is_dropped_while_the_counts_stay(tmp_path: Path, store: GapStore) -> None:
    cfg = _config(tmp_path, keep_days=2)
    clock = Clock()
    rec = GapRecorder(lambda: cfg, clock, store)
    rec.observe(_asked("年假怎么算"))
    await rec.flush()
    clock.t += DAY + 3600
    rec.observe(_asked("年假怎么算？"))
    await rec.flush()
    [g] = group(await store.questions(cfg.gaps, clock.t, with_examples=True))
    assert g.examples == ["年假怎么算？", "年假怎么算"]
    [later] = group(await store.questions(cfg.gaps, NOW + 2 * DAY + 60, with_examples=True))
    assert later.count == 2 and later.examples == ["年假怎么算？"]  # the first text passed keep_days
    if isinstance(store, RedisGapStore):  # dropped, not only hidden
        [texts] = [await store.client.zrange(k, 0, -1) for k in await store.client.keys(f"{store.p}:gaps:t:*")]
        assert len(texts) == 1 and "年假怎么算？".encode() in texts[0]
    elif isinstance(store, MemoryGapStore):
        assert [t for _, t in next(iter(store._x.values()))] == ["年假怎么算？"]


async def test_a_flood_evicts_unfiled_unmarked_groups_before_filed_or_marked_ones(tmp_path: Path,
                                                                                 store: GapStore) -> None:
    """One token holder asking max_questions new questions cannot push out what owners work on."""
    cfg = _config(tmp_path, max_questions=10)
    rec, clock = await _asked_one_a_second(cfg, store, ("年假怎么算", "出差怎么报销", "加班费怎么算"))
    keys = {q.examples[0]: q.key for q in await store.questions(cfg.gaps, clock.t, with_examples=True)}
    for text, mark in (("年假怎么算", "filed"), ("出差怎么报销", "resolved")):
        await rec.states.put(keys[text], dataclasses.replace(GroupState(), state=mark, record="r"), set(keys.values()),
                             clock.t, cfg.gaps.keep_days)
    flood = dataclasses.replace(VOLC, caller="flood")
    for n in range(30):
        rec.observe(_asked(f"第{n}号机器的型号是什么", asker=flood))
        clock.t += 1
        await rec.flush()
    kept = {q.key for q in await store.questions(cfg.gaps, clock.t, with_examples=False)}
    assert len(kept) == 10 and {keys["年假怎么算"], keys["出差怎么报销"]} <= kept
    assert keys["加班费怎么算"] not in kept  # unmarked: the oldest went first


async def test_the_record_keeps_at_most_max_questions_and_keep_days(tmp_path: Path, store: GapStore) -> None:
    cfg = _config(tmp_path, max_questions=10, keep_days=2)
    clock = Clock()
    rec = GapRecorder(lambda: cfg, clock, store)
    rec.observe(_asked("很久以前的问题"))
    await rec.flush()
    clock.t += 3 * DAY
    for n in range(15):
        rec.observe(_asked(f"问题编号{n}号"))
        clock.t += 1
    await rec.flush()
    kept = await store.questions(cfg.gaps, clock.t, with_examples=False)
    assert len(kept) == 10 and min(q.first for q in kept) == NOW + 3 * DAY + 5


async def test_redis_down_loses_no_answer_and_never_raises(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    dead = RedisGapStore("redis://127.0.0.1:1", "kbgate-dead", timeout=0.2)
    rec = GapRecorder(lambda: dataclasses.replace(cfg, gaps=dataclasses.replace(cfg.gaps, key=None)), Clock(), dead)
    rec.observe(_asked("年假怎么算"))
    await rec.flush()  # the key cannot be read: the question waits, nothing raises
    rec._key = KEY
    await rec.flush()  # the write fails: dropped, counted, nothing raises
    assert rec.dropped == 1
    await dead.close()


async def test_a_no_hit_question_keeps_its_nearest_pages_and_why_it_did_not_get_them(
        tmp_path: Path, store: GapStore) -> None:
    """Under the route's floor, or over it (so the caller's scope or conditions left it out); the
    question's words a page lacks only with the text kept."""
    pages = [{"index": "kb", "doc_id": "a.md", "title": "A", "path": "a.md", "relevance": 0.05, "unmatched": ["报销"]},
             {"index": "kb", "doc_id": "b.md", "title": "B", "path": "b.md", "relevance": 0.6, "unmatched": []}]
    asked: list[tuple[str, str]] = []

    def nearest(index: str, query: str, limit: int) -> list[dict[str, Any]]:
        asked.append((index, query))
        return [dict(p) for p in pages[:limit]]

    for keep in (True, False):
        cfg = _config(tmp_path, keep_text=keep)
        rec = GapRecorder(functools.partial(lambda c: c, cfg), Clock(), store, nearest=nearest)
        rec.observe(_asked("出差报销找谁审批，电话13812345678" if keep else "年终奖什么时候发放"))
        await rec.flush()
    assert all("13812345678" not in q for _, q in asked)  # the index is asked the masked text
    kept = {q.examples[0] if q.examples else "": q for q in await store.questions(cfg.gaps, NOW, with_examples=True)}
    with_text = kept["出差报销找谁审批，电话[phone]"]
    floor = cfg.search.relevance_floor
    assert [(n["doc_id"], n["why"], n["floor"]) for n in with_text.near] == [("a.md", "floor", floor),
                                                                               ("b.md", "scope", floor)]
    assert with_text.near[0]["unmatched"] == ["报销"]
    [group_of_it] = [g for g in group(list(kept.values())) if "出差报销找谁审批，电话[phone]" in g.examples]
    assert group_of_it.public()["near_misses"] == with_text.near
    assert all("unmatched" not in n for n in kept[""].near)  # the text not kept: nor its words
