"""indexes/dense/cache.py, texts.py, config.py: the embedding cache, the text embedded per chunk,
the identity (fingerprint) of a vector space."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexes.dense.cache import EmbeddingCache, text_key
from indexes.dense.config import ApiKey, DenseConfig
from indexes.dense.texts import passage_text


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
