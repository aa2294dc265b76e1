"""gateway.evaluation.eval_build: the hybrid build cost `kbgate eval` prints (CPU to embed chunks)."""

from __future__ import annotations

from gateway.evaluation.eval_build import build_cost
from indexes.dense import DenseConfig
from indexes.types import Document, Section


def test_build_cost_embeds_a_sample_of_chunks_with_the_local_model() -> None:
    docs = [Document(id=f"d{i}.md", title=f"第{i}页", sections=(Section("", f"第{i}段正文，说明备份与恢复。"),))
            for i in range(30)]
    cpu_s, chunks = build_cost(docs, DenseConfig(provider="local", model="use-multilingual-v3"), sample=10)
    assert chunks == 10 and cpu_s > 0
    served = DenseConfig(provider="openai", model="m", url="http://127.0.0.1:9/embeddings")
    assert build_cost(docs, served) == (0.0, 0)  # a served model's cost is the service's
    assert build_cost([], DenseConfig(provider="local", model="use-multilingual-v3")) == (0.0, 0)
