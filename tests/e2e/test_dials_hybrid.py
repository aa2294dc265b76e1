"""A hybrid index's dense share per route, end to end: `kbgate index add` embeds with the
embedded model, a real `kbgate serve` answers signed callbacks on two routes over the one index
(dense_share 0: BM25's order; dense_share 1: the nearest neighbours' order), and `kbgate try`
shows each route's effective dials, which the route set and which are the index's."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import orjson

from indexes.types import Document, Section
from tests.support import harness
from tests.support.callbacks import post
from tests.support.configs import ACME_KEYS, ENV, SECRET_ACME, config, tenant, write
from tests.support.documents import as_jsonl
from tests.support.harness import free_port, serve
from tests.support.paths import ROOT

QUESTION = "明天天气怎么样"
FORECAST = "明天多云转小雨，气温十五到二十度，出门请带伞。"
FIELDS = "天气字段、明天字段、天气字段的默认值：这些字段名是示例配置里随便取的，天气和明天都只是名字。"
DOCS = [  # 'forecast' answers it; 'fields' repeats its words (天气, 明天) but means something else
    Document("forecast", "天气预报", (Section("", FORECAST),), dataset="public"),
    Document("fields", "配置项说明", (Section("", FIELDS),), dataset="public"),
    Document("br", "备份", (Section("", "使用 BR 工具把全量数据备份到 S3 对象存储。"),), dataset="public"),
]
ROUTES = {"lexical": {"dense_share": 0.0}, "dense": {"dense_share": 1.0, "candidates": 10}}


def write_site(tmp: Path, port: int, *, dense: bool = True) -> Path:
    """tmp/docs/pages.jsonl and tmp/gateway.toml: the ROUTES over index 'docs', hybrid with the
    embedded model (without `dense`: no dense setting, the index left to the default)."""
    (tmp / "docs").mkdir()
    (tmp / "docs" / "pages.jsonl").write_text(as_jsonl(DOCS), "utf-8")
    acme = tenant("acme", keys=ACME_KEYS, routes=[("tech", name, "docs") for name in ROUTES])
    for route in acme["acme"]["routes"]:
        route.update(ROUTES[route["second_level_id"]])
    data = config(tmp, tenants=[acme], port=port, search={"relevance_floor": 0},
                  dense={"docs": {"provider": "local", "model": "use-multilingual-v3", "query_timeout_ms": 5000}}
                  if dense else None)
    return write(tmp / "gateway.toml", data)


def ids(c: httpx.Client, base: str, second: str) -> list[str]:
    r = post(c, base, SECRET_ACME, second=second, query=QUESTION, limit=3)
    assert r.status_code == 200, r.text
    answer = orjson.loads(r.content)
    assert answer["Ret"] == 0, answer
    return [item["Id"] for item in answer["Result"]]


def test_two_routes_on_one_hybrid_index_weigh_the_dense_side_as_configured(tmp_path: Path) -> None:
    port = free_port()
    cfg = write_site(tmp_path, port)
    built = harness.kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress",
                           str(tmp_path / "docs"), env=ENV, timeout=300)
    assert built.returncode == 0, built.stderr
    with serve(cfg, port=port, env=ENV, cwd=ROOT) as srv, httpx.Client(timeout=30) as c:
        deadline = time.monotonic() + 60  # the worker loads the model in the background
        dense = ids(c, srv.base, "dense")
        while dense[:1] != ["forecast"] and time.monotonic() < deadline:
            time.sleep(0.5)
            dense = ids(c, srv.base, "dense")
        assert dense[0] == "forecast"  # the nearest neighbour: the page that answers the question
        assert ids(c, srv.base, "lexical")[0] == "fields"  # BM25 alone: the page that repeats its words
    tried = harness.kbgate("try", "--config", str(cfg), "--caller", "volcengine", "--tenant", "acme", "--first",
                           "tech", "--second", "dense", "--query", QUESTION, env=ENV, timeout=300)
    assert tried.returncode == 0, tried.stderr
    assert "dials: dense_share 1.0 · candidates 10 · neighbours 0 (set by the route: dense_share, candidates)" \
        in tried.stdout, tried.stdout
    tried = harness.kbgate("try", "--config", str(cfg), "--caller", "volcengine", "--tenant", "acme", "--first",
                           "tech", "--second", "lexical", "--query", QUESTION, "--json", env=ENV, timeout=300)
    assert tried.returncode == 0, tried.stderr
    [search] = orjson.loads(tried.stdout)["searches"]
    assert search["dials"] == {"dense_share": 0.0, "candidates": 100, "neighbours": 0, "route": ["dense_share"]}


def test_check_config_warns_of_a_dense_share_on_an_index_built_lexical(tmp_path: Path) -> None:
    """An index the config leaves to the default but built before hybrid was (no vectors) is
    served lexically: the config loads (only the disk tells), and check-config names the inert
    dial and the command that gives the index its vectors."""
    from indexes.store import IndexStore

    cfg = write_site(tmp_path, free_port(), dense=False)
    IndexStore(tmp_path / "indexes").create_or_open_for_write("docs").ingest(DOCS, progress=False)
    checked = harness.kbgate("check-config", "--config", str(cfg), env=ENV, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for route, keys in (("routes[0]", ("dense_share",)), ("routes[1]", ("dense_share", "candidates"))):
        for key in keys:
            assert f"warning: tenants.acme.{route}.{key} is inert: index docs is served lexically until it has " \
                   "vectors (kbgate index embed)" in checked.stdout, checked.stdout
