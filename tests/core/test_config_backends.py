"""gateway/core/config/backends.py: `[indexes.NAME] backend = "milvus"` loads its connection
(defaults, every key, the token from env or file, never in repr), every invalid key is refused
naming it, and the indexer's loader reads the same."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_backends
from gateway.core.errors import ConfigError
from indexes.types import MilvusConfig
from tests.support.configs import ENV, config, parse, write

TOKEN = "root:Milvus-Token-9f8e7d"


def data(**table: Any) -> dict[str, Any]:
    d = config(Path("."), indexes="idx")
    d["indexes"]["wiki"] = table
    return d


def test_defaults(tmp_path: Path) -> None:
    cfg = parse(data(backend="milvus", uri="http://127.0.0.1:19530"), tmp_path, env=ENV)
    assert cfg.remote == {"wiki": MilvusConfig("http://127.0.0.1:19530", "wiki")}
    assert cfg.remote["wiki"].consistency == "Strong" and cfg.remote["wiki"].timeout_seconds == 2.0


def test_every_key_and_a_token_from_env_or_file(tmp_path: Path) -> None:
    table = {"backend": "milvus", "uri": "https://in01.zillizcloud.example:443", "token_env": "MILVUS_TOKEN",
             "collection": "kb_wiki", "consistency": "Bounded", "timeout_seconds": 0.5, "dense": "none"}
    m = parse(data(**table), tmp_path, env={**ENV, "MILVUS_TOKEN": TOKEN}).remote["wiki"]
    assert (m.uri, m.collection, m.token, m.consistency, m.timeout_seconds) == (
        "https://in01.zillizcloud.example:443", "kb_wiki", TOKEN, "Bounded", 0.5)
    assert TOKEN not in repr(m)
    (tmp_path / "token").write_text(TOKEN + "\n")
    del table["token_env"]
    assert parse(data(**table, token_file="token"), tmp_path, env=ENV).remote["wiki"].token == TOKEN


def test_a_name_that_is_no_collection_name_gets_one() -> None:
    from gateway.core.config.backends import _COLLECTION

    d = config(Path("."), indexes="idx")
    d["indexes"]["9.docs-cn"] = {"backend": "milvus", "uri": "http://h:1"}
    cfg = parse(d, Path("."), env=ENV)
    assert cfg.remote["9.docs-cn"].collection == "kb_9_docs_cn" and _COLLECTION.fullmatch("kb_9_docs_cn")


@pytest.mark.parametrize(("table", "key"), [
    ({"backend": "opensearch", "uri": "http://h:1"}, "indexes.wiki.backend"),
    ({"backend": "milvus"}, "indexes.wiki.uri"),
    ({"backend": "milvus", "uri": "grpc://h:19530"}, "indexes.wiki.uri"),
    ({"backend": "milvus", "uri": "http://h:1", "collection": "kb-wiki"}, "indexes.wiki.collection"),
    ({"backend": "milvus", "uri": "http://h:1", "consistency": "strong"}, "indexes.wiki.consistency"),
    ({"backend": "milvus", "uri": "http://h:1", "timeout_seconds": 0}, "indexes.wiki.timeout_seconds"),
    ({"backend": "milvus", "uri": "http://h:1", "token_env": "NOT_SET"}, "indexes.wiki.token_env"),
    ({"backend": "milvus", "uri": "http://h:1", "token_env": "A", "token_file": "b"}, "indexes.wiki"),
    ({"backend": "milvus", "uri": "http://h:1", "dense": "use-multilingual-v3"}, "indexes.wiki.dense"),
    ({"backend": "milvus", "uri": "http://h:1", "urls": "x"}, "indexes.wiki.urls"),
    ({"uri": "http://h:1"}, "indexes.wiki.uri"),
    ({"backend": "tantivy", "collection": "kb"}, "indexes.wiki.collection"),
])
def test_invalid_keys_are_refused_naming_the_key(table: dict[str, Any], key: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        parse(data(**table), tmp_path, env={**ENV, "A": TOKEN})
    assert exc.value.key == key, exc.value.message
    assert TOKEN not in exc.value.message


def test_the_indexer_reads_the_backends(tmp_path: Path) -> None:
    cfg = write(tmp_path / "gateway.toml", data(backend="milvus", uri="http://127.0.0.1:19530",
                                                 token_env="MILVUS_TOKEN"))
    assert load_backends(cfg, {"MILVUS_TOKEN": TOKEN})["wiki"].token == TOKEN


def test_a_changed_backend_needs_a_restart(tmp_path: Path) -> None:
    from gateway.core.config import load_config
    from gateway.serve.reload import reload_config

    path = write(tmp_path / "gateway.toml", data(backend="milvus", uri="http://127.0.0.1:19530"))
    old = load_config(path, env=ENV)
    write(path, data(backend="milvus", uri="http://127.0.0.1:19531"))
    new, changed = reload_config(old, env=ENV)
    assert changed == ["remote"] and new.remote == old.remote  # the running engine stays until a restart
