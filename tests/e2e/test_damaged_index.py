"""A damaged index (meta.json overwritten, a segment file lost) through the real `kbgate` CLI:
each command names it in one clear line, `index list` still lists the others, and
`check-config` opens every routed index as a worker would. (A running worker's side, /readyz
and its answers: tests/serve/test_app.py.)
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.e2e.test_cli import write_config
from tests.support.harness import free_port, kbgate
from tests.support.paths import ROOT

DOCS = ROOT / "deploy" / "demo" / "docs"


@pytest.fixture(name="cfg")
def _cfg(tmp_path: Path) -> Path:
    """The `make run` config (route tech/software → index demo-docs) with demo-docs and a
    second index 'aaa' built by the CLI."""
    cfg = write_config(tmp_path, free_port(), None, 1, "x")
    for name in ("demo-docs", "aaa"):
        built = kbgate("index", "add", "--config", str(cfg), "--index", name, "--no-progress", str(DOCS))
        assert built.returncode == 0, built.stderr
    return cfg


def _damage(folder: Path, how: str) -> None:
    if how == "meta.json overwritten":
        (folder / "meta.json").write_text("{garbage")
    else:
        sorted(folder.glob("*.idx"))[0].unlink()


@pytest.mark.parametrize("how", ["meta.json overwritten", "segment file deleted"])
def test_index_commands_name_a_damaged_index_without_a_traceback(cfg: Path, how: str) -> None:
    folder = cfg.parent / "indexes" / "demo-docs"
    _damage(folder, how)
    listed = kbgate("index", "list", "--config", str(cfg))
    assert listed.returncode == 1
    lines = listed.stdout.splitlines()
    assert lines[0].startswith("aaa\tdocuments=")  # the others are still listed
    assert lines[1] == "demo-docs\tDAMAGED"
    assert listed.stderr.startswith(f"kbgate: Index 'demo-docs' at {folder} is damaged, Tantivy cannot open it (")
    for args in (["index", "stats", "--index", "demo-docs"],
                 ["index", "add", "--index", "demo-docs", "--no-progress", str(DOCS)]):
        r = kbgate(*args[:2], "--config", str(cfg), *args[2:])
        assert r.returncode == 1, r.stdout + r.stderr
        assert r.stderr.startswith("kbgate: Index 'demo-docs'") and "is damaged" in r.stderr
        assert "rebuild it: delete the folder" in r.stderr and "Traceback" not in r.stderr
    # following the message rebuilds it
    shutil.rmtree(folder)
    assert kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
                  str(DOCS)).returncode == 0
    assert kbgate("index", "list", "--config", str(cfg)).returncode == 0


def test_check_config_opens_each_routed_index(cfg: Path) -> None:
    cfg.write_text(cfg.read_text() + '[agent.routes.handbook]\nindex = "demo-docs"\n'
                   '[agent.routes.other]\nindex = "aaa"\n')
    assert kbgate("check-config", "--config", str(cfg)).returncode == 0
    folder = cfg.parent / "indexes" / "demo-docs"
    _damage(folder, "meta.json overwritten")
    r = kbgate("check-config", "--config", str(cfg))  # printed "[ok]" and exit 0: the folder was there
    assert r.returncode == 1, r.stdout + r.stderr
    assert "  route tech/software -> index demo-docs [DAMAGED]" in r.stdout
    assert "agent route handbook -> index demo-docs [DAMAGED]" in r.stdout
    assert "agent route other -> index aaa [ok]" in r.stdout
    assert f"  Index 'demo-docs' at {folder} is damaged, Tantivy cannot open it (" in r.stdout
    assert f"run `kbgate index add --config {cfg} --index demo-docs PATH...` again" in r.stdout  # FILE filled in
    shutil.rmtree(folder)
    r = kbgate("check-config", "--config", str(cfg))
    assert r.returncode == 1
    assert "  route tech/software -> index demo-docs [MISSING]" in r.stdout
    assert f"  index demo-docs is not built yet: build it with `kbgate index add --config {cfg} --index demo-docs" \
        in r.stdout
