"""bench.stack: the configs the benchmark serves from name each index's path (lexical or hybrid),
whatever the gateway's default for an index without a `dense` line is."""

from __future__ import annotations

from pathlib import Path

from bench.stack import LEXICAL, lexical_keyword, write_config, write_routes_config
from gateway.core.config import load_config


def _lexical_named(dense: object, index: str) -> bool:
    """True when the loaded config says `index` is lexical: named so (`dense = "none"`, where the
    gateway has the keyword) and holding no hybrid settings."""
    if index in dense:  # type: ignore[operator]
        return False
    return lexical_keyword() is None or index in getattr(dense, "lexical", ())


def test_routes_config_names_the_lexical_and_the_hybrid_path(tmp_path: Path) -> None:
    cc = write_routes_config(tmp_path, tmp_path / "indexes", {"lex": "lex", "hyb": "hyb"}, 8080, 2,
                             "redis://127.0.0.1:6379/15", answer_cache_entries=0,
                             dense={"lex": LEXICAL, "hyb": "use-multilingual-v3"})
    cfg = load_config(cc.config)
    assert cfg.dense["hyb"].provider == "local" and cfg.dense["hyb"].model == "use-multilingual-v3"
    assert _lexical_named(cfg.dense, "lex")
    if lexical_keyword() is not None:
        assert 'dense = "none"' in cc.config.read_text()


def test_scale_config_names_its_path_and_searches_every_callback(tmp_path: Path) -> None:
    lexical, _ = write_config(tmp_path, tmp_path / "indexes", "bench-2k", 8080, 2, "redis://127.0.0.1:6379/15")
    cfg = load_config(lexical)
    assert _lexical_named(cfg.dense, "bench-2k")
    assert cfg.search.answer_cache_entries == 0  # the cold path: every callback searched
    hybrid, _ = write_config(tmp_path, tmp_path / "indexes", "bench-2k-hybrid", 8080, 2, "redis://127.0.0.1:6379/15",
                             dense="use-multilingual-v3")
    assert load_config(hybrid).dense["bench-2k-hybrid"].model == "use-multilingual-v3"
