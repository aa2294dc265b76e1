"""gateway/core/config/indexes.py: [indexes.<name>.dense] tables load (defaults, every key,
API keys from env or file), every invalid one is refused naming the key, an API key's value
appears nowhere, the indexer reads only [indexes], and the dense settings need a restart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config, load_indexes
from gateway.core.errors import ConfigError
from gateway.serve.reload import RESTART_ONLY
from indexes.dense.config import DenseChoices, DenseConfig
from tests.support.configs import EMBEDDING_KEY, ENV, config, parse, tenant, write
from tests.support.paths import ROOT


def data(dense: dict[str, Any] | None = None, **indexes: Any) -> dict[str, Any]:
    """A config with indexes.dir 'idx', [indexes.docs.dense] = dense (when given), and further
    raw [indexes] entries."""
    d = config(Path("."), indexes="idx", dense={"docs": dense} if dense is not None else None)
    d["indexes"].update(indexes)
    return d


def refused(d: dict[str, Any], key: str, tmp_path: Path) -> str:
    with pytest.raises(ConfigError) as exc:
        parse(d, tmp_path)
    assert exc.value.key == key, exc.value.message
    assert EMBEDDING_KEY not in exc.value.message
    return exc.value.message


def test_local_defaults(tmp_path: Path) -> None:
    cfg = parse(data({"provider": "local", "model": "use-multilingual-v3"}), tmp_path)
    d = cfg.dense["docs"]
    assert d == DenseConfig(provider="local", model="use-multilingual-v3")
    assert (d.fusion, d.lexical_weight, d.dense_weight, d.candidates, d.query_timeout_ms, d.breaker_failures) == (
        "calibrated", 0.8, 0.2, 50, 250, 3)
    assert parse(data(), tmp_path).dense == {}


def test_each_fusion_brings_its_own_default_weights(tmp_path: Path) -> None:
    for fusion, weights in (("mix", (0.7, 0.3)), ("rrf", (0.7, 0.3)), ("calibrated", (0.8, 0.2))):
        d = parse(data({"provider": "local", "model": "use-multilingual-v3", "fusion": fusion}), tmp_path).dense["docs"]
        assert (d.fusion, d.lexical_weight, d.dense_weight) == (fusion, *weights)
    d = parse(data({"provider": "local", "model": "use-multilingual-v3", "fusion": "mix", "dense_weight": 0.5}),
              tmp_path).dense["docs"]
    assert (d.lexical_weight, d.dense_weight) == (0.7, 0.5)  # a weight given is kept


def test_openai_with_every_key(tmp_path: Path) -> None:
    table = {"provider": "openai", "model": "doubao-embedding-text-240715",
             "url": "https://ark.example/api/v3/embeddings", "api_key_env": "KBGATE_EMBEDDING_KEY", "dimensions": 1024,
             "query_prefix": "query: ", "passage_prefix": "passage: ",
             "batch_size": 64, "max_input_chars": 1000, "timeout_seconds": 20, "retries": 5, "backoff_seconds": 1,
             "query_timeout_ms": 300, "breaker_failures": 5, "breaker_reset_seconds": 10, "candidates": 80,
             "fusion": "rrf", "rrf_k": 30, "lexical_weight": 0.6, "dense_weight": 0.4, "cache_dir": "cache"}
    d = parse(data(table), tmp_path).dense["docs"]
    assert d.api_key is not None and d.api_key.reveal() == EMBEDDING_KEY
    assert "sk-embed" not in repr(d) and d.cache_dir == tmp_path / "cache"
    assert (d.dimensions, d.batch_size, d.fusion, d.rrf_k, d.lexical_weight, d.candidates) == (
        1024, 64, "rrf", 30, 0.6, 80)


def test_api_key_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "embed-key").write_text("sk-from-file\n")
    table = {"provider": "openai", "model": "m", "url": "http://127.0.0.1:8000/v1/embeddings",
             "api_key_file": "embed-key"}
    d = parse(data(table), tmp_path).dense["docs"]
    assert d.api_key is not None and d.api_key.reveal() == "sk-from-file"


OPENAI = {"provider": "openai", "model": "m", "url": "http://127.0.0.1:8000/v1/embeddings"}


@pytest.mark.parametrize(("table", "key"), [
    ({"model": "x"}, "indexes.docs.dense.provider"),
    ({"provider": "cohere", "model": "x"}, "indexes.docs.dense.provider"),
    ({"provider": "local"}, "indexes.docs.dense.model"),
    ({"provider": "local", "model": "bge-m3"}, "indexes.docs.dense.model"),
    ({"provider": "openai", "model": "m"}, "indexes.docs.dense.url"),
    ({**OPENAI, "url": "ftp://x/embeddings"}, "indexes.docs.dense.url"),
    ({**OPENAI, "api_key_env": "NOT_SET"}, "indexes.docs.dense.api_key_env"),
    ({**OPENAI, "api_key_file": "missing"}, "indexes.docs.dense.api_key_file"),
    ({**OPENAI, "api_key_env": "KBGATE_EMBEDDING_KEY", "api_key_file": "k"}, "indexes.docs.dense"),
    ({"provider": "local", "model": "use-multilingual-v3", "url": "http://x/"}, "indexes.docs.dense.url"),
    ({**OPENAI, "threads": 2}, "indexes.docs.dense.threads"),
    ({**OPENAI, "fusion": "max"}, "indexes.docs.dense.fusion"),
    ({**OPENAI, "batch_size": 0}, "indexes.docs.dense.batch_size"),
    ({**OPENAI, "query_timeout_ms": 0}, "indexes.docs.dense.query_timeout_ms"),
    ({**OPENAI, "query_timeout_ms": 2.5}, "indexes.docs.dense.query_timeout_ms"),
    ({**OPENAI, "timeout_seconds": "fast"}, "indexes.docs.dense.timeout_seconds"),
    ({**OPENAI, "retries": 11}, "indexes.docs.dense.retries"),
    ({**OPENAI, "candidates": 5000}, "indexes.docs.dense.candidates"),
    ({**OPENAI, "lexical_weight": 0, "dense_weight": 0}, "indexes.docs.dense.dense_weight"),
    ({**OPENAI, "query_prefix": 3}, "indexes.docs.dense.query_prefix"),
    ({**OPENAI, "modle": "typo"}, "indexes.docs.dense.modle"),
])
def test_invalid_dense_tables_name_the_key(table: dict[str, Any], key: str, tmp_path: Path) -> None:
    refused(data(table), key, tmp_path)


def test_invalid_index_tables_name_the_key(tmp_path: Path) -> None:
    refused(data(None, docs={"sparse": {}}), "indexes.docs.sparse", tmp_path)
    refused(data(None, docs={"dense": "yes"}), "indexes.docs.dense", tmp_path)
    refused(data(None, docs=3), "indexes.docs", tmp_path)
    refused(data(None, **{"bad name!": {"dense": {}}}), "indexes.bad name!", tmp_path)


def test_the_indexer_reads_only_indexes(tmp_path: Path) -> None:
    dense_table = {**OPENAI, "api_key_env": "KBGATE_EMBEDDING_KEY"}
    acme = tenant("acme", keys=[("k", "env:UNSET_GATEWAY_SECRET")])
    cfg = write(tmp_path / "gateway.toml", config(tmp_path, tenants=[acme], indexes="idx", dense={"docs": dense_table}))
    folder, dense = load_indexes(cfg, env={"KBGATE_EMBEDDING_KEY": "sk-x"})
    assert folder == tmp_path / "idx" and dense["docs"].model == "m"
    with pytest.raises(ConfigError) as exc:
        load_indexes(cfg, env={})
    assert exc.value.key == "indexes.docs.dense.api_key_env"


def test_dense_settings_need_a_restart() -> None:
    assert "dense" in RESTART_ONLY


def test_example_config_documents_every_dense_key() -> None:
    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    for field in DenseConfig.__dataclass_fields__:
        name = {"api_key": "api_key_env"}.get(field, field)
        assert f"# {name} = " in text or f"\n{name} = " in text, field
    assert "api_key_file" in text


def test_example_config_with_its_dense_table_uncommented_loads(tmp_path: Path) -> None:
    lines = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8").splitlines()
    out, inside = [], False
    for line in lines:
        if line.startswith("# [indexes.software-docs.dense]"):
            inside = True
        elif inside and not line.startswith("# ") and line.strip() != "#":
            inside = False
        local_only = line.startswith("# threads")  # documented in the same block, refused with openai
        if inside and not local_only and line.startswith("# ") and not line.startswith("#  ") and (
                line.startswith("# [") or " = " in line.split("#")[1]):
            line = line[2:]
        out.append(line)
    path = tmp_path / "gateway.toml"
    path.write_text("\n".join(out), "utf-8")
    cfg = load_config(path, env={"ACME_SECRET": "x" * 20, "ACME_SECRET_NEXT": "y" * 20, **ENV})
    assert cfg.dense["software-docs"].provider == "openai"


def test_the_demo_of_make_run_is_hybrid_with_the_embedded_model_by_default(tmp_path: Path) -> None:
    # What `make demo` reads (the indexer needs no secret: data/demo/secret may not exist yet).
    _, dense = load_indexes(ROOT / "deploy" / "demo" / "gateway.toml", env={})
    assert dense == {}  # no line opts in: the default does
    use = DenseConfig(provider="local", model="use-multilingual-v3")
    assert dense.for_index("demo-docs", tmp_path / "demo-docs", creating=True) == use


def test_a_new_index_is_hybrid_unless_its_config_says_dense_none(tmp_path: Path) -> None:
    d = data()
    d["indexes"]["plain"] = {"dense": "none"}
    dense = parse(d, tmp_path).dense
    assert isinstance(dense, DenseChoices) and dense == {} and dense.lexical == {"plain"}
    use = DenseConfig(provider="local", model="use-multilingual-v3")
    assert dense.for_index("docs", tmp_path / "docs", creating=True) == use
    assert dense.for_index("plain", tmp_path / "plain", creating=True) is None
    built = tmp_path / "old"  # built lexical before the default: stays lexical, says how to add vectors
    built.mkdir()
    (built / "meta.json").write_text("{}", "utf-8")
    assert dense.for_index("old", built) is None and dense.unembedded("old", built)
    assert "kbgate index embed --config FILE --index old" in dense.embed_step("old")
    (built / "dense").mkdir()  # vectors: hybrid from then on
    assert dense.for_index("old", built) == use and not dense.unembedded("old", built)
    assert not dense.unembedded("plain", built)


@pytest.mark.parametrize("value", ["nope", 3, ["none"], True])
def test_an_invalid_dense_value_names_the_key(value: Any, tmp_path: Path) -> None:
    d = data()
    d["indexes"]["docs"] = {"dense": value}
    message = refused(d, "indexes.docs.dense", tmp_path)
    assert '"none"' in message or "none" in message


def test_the_one_line_opt_in_names_an_embedded_model(tmp_path: Path) -> None:
    d = data()
    d["indexes"]["docs"] = {"dense": "use-multilingual-v3"}
    assert parse(d, tmp_path).dense["docs"] == DenseConfig(provider="local", model="use-multilingual-v3")
    d["indexes"]["docs"] = {"dense": "bge-m3"}
    assert "use-multilingual-v3" in refused(d, "indexes.docs.dense", tmp_path)


def test_the_cosine_line_is_the_models_unless_the_table_sets_it(tmp_path: Path) -> None:
    use = parse(data({"provider": "local", "model": "use-multilingual-v3"}), tmp_path).dense["docs"]
    e5 = parse(data({"provider": "local", "model": "multilingual-e5-small-q4"}), tmp_path).dense["docs"]
    assert use.cosine_line == (0.30, 0.65) and e5.cosine_line == (0.87, 0.95)
    mine = parse(data({"provider": "local", "model": "use-multilingual-v3", "cosine_zero": 0.4, "cosine_one": 0.8}),
                 tmp_path).dense["docs"]
    assert mine.cosine_line == (0.4, 0.8)
    assert "cosine_zero" in refused(data({"provider": "local", "model": "use-multilingual-v3", "cosine_zero": 0.5,
                                          "cosine_one": 0.5}), "indexes.docs.dense.cosine_one", tmp_path)
