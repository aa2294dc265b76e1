"""gateway/core/config/sync.py: [[indexes.NAME.sources]] load with their defaults, and every invalid
one is refused naming the key, by `kbgate sync` and by the gateway's own config load alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_sync_config
from gateway.core.config.sync import SyncSource
from gateway.core.errors import ConfigError
from tests.support.configs import config, parse


def _toml(tmp_path: Path, sources: str) -> Path:
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[indexes]\ndir = "ix"\nmax_document_bytes = 5000\n{sources}', encoding="utf-8")
    return cfg


def test_each_kind_loads_with_its_defaults(tmp_path: Path) -> None:
    cfg = _toml(tmp_path, '[[indexes.docs.sources]]\nname = "hb"\ntype = "git"\nrepo = "repo"\nsubdir = "/docs/"\n'
                          '[[indexes.docs.sources]]\nname = "site"\ntype = "web"\nsitemap = "https://h/sitemap.xml"\n'
                          '[[indexes.docs.sources]]\nname = "crawl"\ntype = "web"\nstart_url = "https://h/"\n'
                          'max_pages = 20\nrequests_per_second = 0.5\n'
                          '[[indexes.docs.sources]]\nname = "local"\ntype = "folder"\npath = "docs"\ndataset = "ds"\n')
    folder, dense, sources = load_sync_config(cfg)
    assert folder == tmp_path / "ix" and dense == {}
    hb, site, crawl, local = sources["docs"]
    assert hb == SyncSource("docs", "hb", "git", str(tmp_path / "repo"), subdir="docs")
    assert (site.crawl, site.max_pages, site.max_depth, site.max_document_bytes) == (False, 500, 3, 5000)
    assert (crawl.crawl, crawl.location, crawl.max_pages, crawl.requests_per_second) == (True, "https://h/", 20, 0.5)
    assert (local.location, local.dataset, local.key) == (str(tmp_path / "docs"), "ds", "docs/local")


@pytest.mark.parametrize(("body", "key", "words"), [
    ('name = "a"\ntype = "git"\nrepo = "r"\nbrnch = "main"', "indexes.docs.sources[0].brnch", "not a known key"),
    ('name = "a"\ntype = "svn"', "indexes.docs.sources[0].type", "must be 'git', 'web' or 'folder'"),
    ('name = "a"\ntype = "web"', "indexes.docs.sources[0]", "exactly one of sitemap or start_url"),
    ('name = "a"\ntype = "web"\nsitemap = "ftp://h/s.xml"', "indexes.docs.sources[0].sitemap", "http"),
    ('name = "a"\ntype = "web"\nstart_url = "https://h/"\nmax_pages = 0', "indexes.docs.sources[0].max_pages",
     "from 1 to 100000"),
    ('name = "a b"\ntype = "folder"\npath = "x"', "indexes.docs.sources[0].name", "uses letters"),
    ('name = "a"\ntype = "folder"\npath = "x"\ndataset = "a:b"', "indexes.docs.sources[0].dataset", "':'"),
    ('name = "a"\ntype = "git"\nrepo = "r"\nsubdir = "../up"', "indexes.docs.sources[0].subdir", "no '..'"),
    ('type = "folder"\npath = "x"', "indexes.docs.sources[0].name", "is required"),
    # git would take these for options (--output= writes a file, --upload-pack= runs a command)
    ('name = "a"\ntype = "git"\nrepo = "r"\nbranch = "--output=/tmp/x"', "indexes.docs.sources[0].branch",
     "must not start with '-'"),
    ('name = "a"\ntype = "git"\nrepo = "--upload-pack=touch x"', "indexes.docs.sources[0].repo",
     "must not start with '-'"),
])
def test_an_invalid_source_is_refused_naming_the_key(tmp_path: Path, body: str, key: str, words: str) -> None:
    cfg = _toml(tmp_path, f"[[indexes.docs.sources]]\n{body}\n")
    with pytest.raises(ConfigError) as exc:
        load_sync_config(cfg)
    assert exc.value.key == key and words in exc.value.message, exc.value.message


def test_a_repeated_name_and_a_table_instead_of_an_array_are_refused(tmp_path: Path) -> None:
    twice = '[[indexes.docs.sources]]\nname = "a"\ntype = "folder"\npath = "x"\n' * 2
    with pytest.raises(ConfigError) as exc:
        load_sync_config(_toml(tmp_path, twice))
    assert exc.value.key == "indexes.docs.sources[1].name" and "repeats 'a'" in exc.value.message
    with pytest.raises(ConfigError) as exc:
        load_sync_config(_toml(tmp_path, '[indexes.docs.sources]\nname = "a"\n'))
    assert exc.value.key == "indexes.docs.sources"


def test_the_gateway_config_refuses_a_bad_source_too(tmp_path: Path) -> None:
    d: dict[str, Any] = config(Path("."), indexes="idx")
    d["indexes"]["docs"] = {"sources": [{"name": "a", "type": "folder", "path": "x", "max_pages": 3}]}
    with pytest.raises(ConfigError) as exc:
        parse(d, tmp_path)
    assert exc.value.key == "indexes.docs.sources[0].max_pages"


def test_the_example_config_documents_every_key_and_loads_uncommented(tmp_path: Path) -> None:
    from tests.support.paths import ROOT

    text = (ROOT / "deploy" / "gateway.example.toml").read_text("utf-8")
    for key in ("name", "type", "repo", "branch", "subdir", "dataset", "sitemap", "start_url", "max_pages",
                "max_depth", "requests_per_second", "timeout_seconds", "user_agent", "max_document_bytes", "path"):
        assert f"# {key} = " in text or f"; or {key} = " in text, key
    lines = text.splitlines()
    first = lines.index("# [[indexes.software-docs.sources]]")
    block = lines[first:next(i for i in range(first, len(lines)) if lines[i].startswith("# Hybrid retrieval"))]
    tables = "\n".join(ln[2:] for ln in block if ln.startswith("# ") and not ln.startswith("#  "))
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'[indexes]\ndir = "ix"\n{tables}', encoding="utf-8")
    sources = load_sync_config(cfg)[2]["software-docs"]
    assert [(s.name, s.kind) for s in sources] == [("handbook", "git"), ("help-centre", "web"),
                                                  ("shared-drive", "folder")]
