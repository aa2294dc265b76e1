"""`kbgate sync` into a hybrid index: an unchanged document is neither re-indexed nor re-embedded
(a real embeddings server on a free port, tests/support/embedding_server.py)."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.support.embedding_server import running as embedding_server
from tests.support.harness import free_port
from tests.sync.helpers import counts, generation, sync, write_config


def test_a_sync_embeds_only_what_changed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in (("a", "签名密钥每九十天轮换。"), ("b", "证书到期前自动续期。"), ("c", "备份每天凌晨执行。")):
        (docs / f"{name}.md").write_text(f"# {name}\n\n{text}\n", encoding="utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"',
                       extra=f'[indexes.docs.dense]\nprovider = "openai"\nmodel = "use-multilingual-v3"\n'
                             f'url = "{url}/v1/embeddings"\ncache_dir = "cache"\n', lexical=False)
    with embedding_server(port), httpx.Client(timeout=30) as client:
        r = sync(cfg)
        assert r.returncode == 0, r.stderr
        assert counts(r.stdout) == (3, 0, 0, 0) and "3 embedded" in r.stdout
        client.post(f"{url}/reset")
        before = generation(cfg)
        r = sync(cfg)
        assert counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before
        assert client.get(f"{url}/stats").json()["requests"] == 0  # nothing re-embedded, nothing asked
        (docs / "b.md").write_text("# b\n\n证书到期前七天自动续期。\n", encoding="utf-8")
        r = sync(cfg)
        assert counts(r.stdout) == (0, 1, 0, 0)
        assert "vectors of generation" in r.stdout and "(2 kept, 0 from the embedding cache, 1 embedded)" in r.stdout
        assert sum(client.get(f"{url}/stats").json()["batches"]) == 1  # only the changed chunk


def test_a_sync_of_a_new_index_embeds_it_with_the_default_model(tmp_path: Path) -> None:
    """No dense setting: the index a first sync creates is hybrid, with the embedded model, and the
    run prints what the build cost."""
    from indexes.dense.vectors import load_current

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("# 账号管理\n\n重置管理员口令：在登录页点击找回。\n", encoding="utf-8")
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"', lexical=False)
    assert "dense" not in cfg.read_text(encoding="utf-8")
    r = sync(cfg)
    assert r.returncode == 0, r.stderr
    assert "1 embedded" in r.stdout and "build costs: embedding" in r.stdout
    vectors = load_current(tmp_path / "ix" / "docs")
    assert vectors is not None and len(vectors) == 1
