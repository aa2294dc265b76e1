"""gateway/core/config/indexes.py: [indexes.<name>.rerank] tables load (defaults, every key, an
API key from env or file), every invalid one is refused naming the key, the key's value appears
nowhere, the indexer never needs the reranker's key, the rerank settings need a restart, and
deploy/gateway.example.toml documents every key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config, load_indexes
from gateway.core.config.indexes import RERANK_KEYS
from gateway.core.errors import ConfigError
from gateway.serve.reload import RESTART_ONLY
from indexes.rerank import RerankConfig
from tests.support.configs import EMBEDDING_KEY, ENV, config, parse, write
from tests.support.paths import ROOT

URL = "https://dashscope.aliyuncs.com/api/v1/services/rerank/text-rerank/text-rerank"


def data(rerank: dict[str, Any]) -> dict[str, Any]:
    d = config(Path("."), indexes="idx")
    d["indexes"]["docs"] = {"rerank": rerank}
    return d


def refused(rerank: dict[str, Any], key: str, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        parse(data(rerank), tmp_path)
    assert exc.value.key == key, exc.value.message
    assert EMBEDDING_KEY not in exc.value.message
    return exc.value.message


def test_defaults(tmp_path: Path) -> None:
    cfg = parse(data({"provider": "tei", "url": "http://127.0.0.1:8080/rerank"}), tmp_path)
    assert cfg.rerank == {"docs": RerankConfig(provider="tei", url="http://127.0.0.1:8080/rerank")}
    r = cfg.rerank["docs"]
    assert (r.model, r.candidates, r.timeout_ms, r.breaker_failures, r.breaker_reset_seconds) == ("", 20, 500, 3, 30.0)
    assert cfg.dense == {}  # a rerank stage does not make an index hybrid


def test_every_key_and_the_api_key(tmp_path: Path) -> None:
    table = {"provider": "dashscope", "url": URL, "model": "gte-rerank-v2", "api_key_env": "KBGATE_EMBEDDING_KEY",
             "candidates": 30, "timeout_ms": 800, "breaker_failures": 5, "breaker_reset_seconds": 10,
             "max_input_chars": 2000}
    r = parse(data(table), tmp_path).rerank["docs"]
    assert r.api_key is not None and r.api_key.reveal() == EMBEDDING_KEY and EMBEDDING_KEY not in repr(r)
    assert (r.provider, r.model, r.candidates, r.timeout_ms, r.breaker_failures, r.max_input_chars) == (
        "dashscope", "gte-rerank-v2", 30, 800, 5, 2000)
    (tmp_path / "key").write_text("sk-file\n")
    from_file = parse(data({"provider": "cohere", "url": "http://x/v1/rerank", "model": "m", "api_key_file": "key"}),
                      tmp_path).rerank["docs"]
    assert from_file.api_key is not None and from_file.api_key.reveal() == "sk-file"


@pytest.mark.parametrize(("table", "key", "words"), [
    ({"url": URL, "model": "m"}, "indexes.docs.rerank.provider", ""),
    ({"provider": "jina", "url": URL, "model": "m"}, "indexes.docs.rerank.provider", "cohere"),
    ({"provider": "cohere", "model": "m"}, "indexes.docs.rerank.url", ""),
    ({"provider": "cohere", "url": "ftp://x", "model": "m"}, "indexes.docs.rerank.url", "https://api.cohere.com"),
    ({"provider": "cohere", "url": URL}, "indexes.docs.rerank.model", ""),
    ({"provider": "tei", "url": URL, "model": "bge"}, "indexes.docs.rerank.model", "tei"),
    ({"provider": "tei", "url": URL, "candidates": 0}, "indexes.docs.rerank.candidates", ""),
    ({"provider": "tei", "url": URL, "timeout_ms": 20_000}, "indexes.docs.rerank.timeout_ms", ""),
    ({"provider": "tei", "url": URL, "top_n": 3}, "indexes.docs.rerank.top_n", ""),
    ({"provider": "tei", "url": URL, "api_key_env": "NOT_SET_ANYWHERE"}, "indexes.docs.rerank.api_key_env",
     "NOT_SET_ANYWHERE"),
    ({"provider": "tei", "url": URL, "api_key_env": "KBGATE_EMBEDDING_KEY", "api_key_file": "k"},
     "indexes.docs.rerank", "at most one"),
])
def test_invalid_tables_are_refused_naming_the_key(tmp_path: Path, table: dict[str, Any], key: str,
                                                   words: str) -> None:
    assert words in refused(table, key, tmp_path)


def test_the_indexer_never_reads_the_rerankers_key(tmp_path: Path) -> None:
    d = data({"provider": "cohere", "url": "http://x/v1/rerank", "model": "m", "api_key_env": "ONLY_THE_GATEWAY"})
    path = write(tmp_path / "gateway.toml", d)
    indexes_dir, dense = load_indexes(path, env=ENV)  # no ONLY_THE_GATEWAY in it: not read
    assert indexes_dir == tmp_path / "idx" and dense == {}


def test_rerank_needs_a_restart() -> None:
    assert "rerank" in RESTART_ONLY


def test_example_config_documents_every_rerank_key(tmp_path: Path) -> None:
    """deploy/gateway.example.toml documents every key of the table (commented out: it needs a
    served reranker), and uncommenting its block gives a table that loads."""
    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    for name in RERANK_KEYS:
        assert f"# {name} = " in text or f"or {name} = " in text, name
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("# [indexes.software-docs.rerank]"):
            inside = True
        elif inside and not line.startswith("# "):
            inside = False
        if inside and not line.startswith("#  ") and (line.startswith("# [") or " = " in line.split("#")[1]):
            line = line[2:]
        out.append(line)
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(out), "utf-8")
    cfg = load_config(path, env={"ACME_SECRET": "x" * 20, "ACME_SECRET_NEXT": "y" * 20, "RERANK_API_KEY": "rk"})
    assert cfg.rerank["software-docs"] == RerankConfig(
        provider="cohere", url="http://127.0.0.1:9997/v1/rerank", model="bge-reranker-v2-m3",
        api_key=cfg.rerank["software-docs"].api_key)
    assert cfg.rerank["software-docs"].api_key is not None
