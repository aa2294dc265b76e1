"""The pure parts of hybrid retrieval: fusion rules, the circuit breaker, the embedding cache,
vector sets (generations, patching, pruning, atomic CURRENT), the text embedded per chunk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexes.dense.cache import EmbeddingCache, text_key
from indexes.dense.config import ApiKey, DenseConfig
from indexes.dense.fusion import mix, rrf
from indexes.dense.query import Breaker
from indexes.dense.texts import passage_text
from indexes.dense.vectors import Entry, current_generation, load, load_current, publish

# ---- fusion


def test_rrf_rewards_agreement_and_follows_the_formula() -> None:
    lexical = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    dense = [("c", 0.9), ("d", 0.8), ("a", 0.7)]
    fused = dict(rrf(lexical, dense, k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62) and fused["d"] == pytest.approx(1 / 62)
    order = [k for k, _ in rrf(lexical, dense, k=60)]
    assert set(order[:2]) == {"a", "c"}  # in both lists: ahead of any single-list key


def test_rrf_weights_and_a_zero_weight_list() -> None:
    lexical, dense = [("a", 1.0)], [("b", 1.0)]
    assert [k for k, _ in rrf(lexical, dense, dense_weight=2.0)] == ["b", "a"]
    assert rrf(lexical, dense, dense_weight=0.0) == [("a", pytest.approx(1 / 61))]


def test_mix_normalises_each_list_to_0_1() -> None:
    fused = dict(mix([("a", 20.0), ("b", 10.0)], [("b", 0.5), ("c", 0.3)], lexical_weight=1.0, dense_weight=0.5))
    assert fused == {"a": pytest.approx(1.0), "b": pytest.approx(0.5), "c": pytest.approx(0.0)}
    assert dict(mix([("x", 3.0)], [])) == {"x": 1.0}  # a one-score list scales to 1


# ---- breaker


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_breaker_opens_after_consecutive_failures_then_half_opens_one_trial() -> None:
    clock = Clock()
    b = Breaker(failures=3, reset_seconds=10.0, clock=clock)
    for _ in range(2):
        assert b.allow()
        b.failure()
    b.success()  # a success in between resets the count
    for _ in range(3):
        assert b.allow()
        b.failure()
    assert b.state == "open" and not b.allow()
    clock.t = 9.9
    assert not b.allow()
    clock.t = 10.0
    assert b.state == "half-open"
    assert b.allow() and not b.allow()  # one trial at a time
    b.failure()  # the trial failed: open again, for a full period
    assert b.state == "open"
    clock.t = 20.0
    assert b.allow()
    b.success()
    assert b.state == "closed" and b.allow()


# ---- cache


def test_cache_round_trip_ignores_other_lengths_and_survives_reopening(tmp_path: Path) -> None:
    path = EmbeddingCache.path_for(tmp_path, "local:use:p0")
    assert path != EmbeddingCache.path_for(tmp_path, "local:use:p1")
    c = EmbeddingCache(path, dim=4)
    v = np.arange(4, dtype=np.float32)
    c.put_many([(text_key("一"), v), (text_key("二"), np.arange(3, dtype=np.float32))])
    got = c.get_many([text_key("一"), text_key("二"), text_key("三")])
    assert list(got) == [text_key("一")] and np.array_equal(got[text_key("一")], v)
    c.close()
    again = EmbeddingCache(path, dim=4)
    assert len(again) == 2 and text_key("一") in again.get_many([text_key("一")])
    again.close()


def test_passage_text_prefixes_title_and_heading_once() -> None:
    assert passage_text("TiDB 配置", "内存", "正文") == "TiDB 配置\n内存\n正文"
    assert passage_text("同名", "同名", "正文") == "同名\n正文"
    assert passage_text("", "", "正文") == "正文"


def test_config_fingerprint_ignores_url_and_key_but_not_model_or_prefixes() -> None:
    a = DenseConfig(provider="openai", model="bge-m3", url="http://a/v1/embeddings", api_key=ApiKey("k1"))
    b = DenseConfig(provider="openai", model="bge-m3", url="http://b/v1/embeddings", api_key=ApiKey("k2"))
    assert a.fingerprint == b.fingerprint
    assert a.fingerprint != DenseConfig(provider="openai", model="bge-m4", url="http://a/").fingerprint
    assert a.fingerprint != DenseConfig(provider="openai", model="bge-m3", url="http://a/",
                                        query_prefix="query: ").fingerprint
    with pytest.raises(ValueError):
        DenseConfig(provider="local", model="bge-m3")


# ---- vector sets


def _entries(rng: np.random.Generator, docs: range, per_doc: int = 3, dim: int = 16) -> list[Entry]:
    out = []
    for d in docs:
        for n in range(per_doc):
            v = rng.normal(size=dim).astype(np.float32)
            out.append(Entry(f"d{d}#{n}", f"d{d}", v / np.linalg.norm(v)))
    return out


def test_publish_load_search_patch_and_prune(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    first = _entries(rng, range(40))
    docs = {f"d{d}": "r1" for d in range(40)}
    publish(tmp_path, 5, "fp", 16, docs, [], None, first)
    assert current_generation(tmp_path) is not None and current_generation(tmp_path)[0] == 5  # type: ignore[index]
    vs = load_current(tmp_path)
    assert vs is not None and len(vs) == 120 and vs.generation == 5
    top = vs.search(first[7].vector, 3)
    assert top[0][:2] == ("d2#1", "d2") and top[0][2] == pytest.approx(1.0, abs=1e-5)

    # Generation 6: d0 changed (3 new vectors), d39 deleted; the rest kept → the graph is patched.
    prev = load_current(tmp_path, view=False)
    assert prev is not None
    changed = _entries(rng, range(1))
    keep = [k for k, (_, d) in prev.chunk_of.items() if d not in ("d0", "d39")]
    docs6 = {**{f"d{d}": "r1" for d in range(1, 39)}, "d0": "r2"}
    folder6 = publish(tmp_path, 6, "fp", 16, docs6, keep, prev, changed)
    vs6 = load_current(tmp_path)
    assert vs6 is not None and vs6.generation == 6 and len(vs6) == 117
    assert vs6.search(changed[1].vector, 1)[0][0] == "d0#1"
    assert all(d != "d39" for _, d in vs6.chunk_of.values())
    assert vs6.revision_of["d0"] == "r2"
    # The previous generation stays (a reader may still map it); older ones are pruned.
    publish(tmp_path, 7, "fp", 16, docs6, list(vs6.chunk_of), load_current(tmp_path, view=False), [])
    names = sorted(p.name for p in (tmp_path / "dense").iterdir() if p.name.startswith("g-"))
    assert len(names) == 2 and folder6.name in names
    assert load_current(tmp_path).generation == 7  # type: ignore[union-attr]


def test_an_incomplete_generation_is_never_loaded(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    folder = publish(tmp_path, 1, "fp", 16, {"d0": "r"}, [], None, _entries(rng, range(1)))
    (folder / "manifest.json").write_text("{not json")
    assert load(folder) is None and load_current(tmp_path) is None


def test_empty_index_publishes_an_empty_set(tmp_path: Path) -> None:
    publish(tmp_path, 3, "fp", 0, {}, [], None, [])
    vs = load_current(tmp_path)
    assert vs is not None and len(vs) == 0 and vs.search(np.ones(4, dtype=np.float32), 5) == []
