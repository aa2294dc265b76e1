"""gateway.evaluation.rerank_standin: the stand-in reranker of `kbgate eval`'s rerank column, a real
hypercorn process speaking the Cohere wire format with the embedded model's cosine as its score."""

from __future__ import annotations

import httpx

from indexes.rerank import RerankConfig, RerankStage
from tests.support import local_server
from tests.support.harness import free_port


def test_the_standin_answers_in_the_cohere_shape_and_the_rerank_stage_reads_it() -> None:
    docs = ["备份到 S3 对象存储", "红烧肉的做法", "使用 BR 工具把集群数据备份到 S3"]
    with local_server.running("gateway.evaluation.rerank_standin", free_port()) as base:
        r = httpx.post(f"{base}/v1/rerank", json={"model": "stand-in", "query": "用 BR 备份到 S3",
                                                  "documents": docs, "top_n": 2}, timeout=30)
        assert r.status_code == 200
        results = r.json()["results"]
        assert len(results) == 2 and results[0]["relevance_score"] >= results[1]["relevance_score"]
        assert {x["index"] for x in results} <= {0, 2} and all(0 <= x["relevance_score"] <= 1 for x in results)
        stage = RerankStage("docs", RerankConfig(provider="cohere", url=f"{base}/v1/rerank", model="stand-in",
                                                 timeout_ms=10_000))
        try:
            scores = stage.scores("用 BR 备份到 S3", docs)
        finally:
            stage.close()
        assert scores is not None and len(scores) == 3 and scores[1] < min(scores[0], scores[2])
        again = httpx.post(f"{base}/v1/rerank", json={"model": "stand-in", "query": "用 BR 备份到 S3",
                                                      "documents": docs}, timeout=30).json()["results"]
        assert sorted(x["index"] for x in again) == [0, 1, 2]  # no top_n: every document, vectors cached
