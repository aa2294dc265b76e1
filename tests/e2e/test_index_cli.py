"""`kbgate index add` end to end (gateway/ops/index_commands.py): the real CLI over real
indexes. A stable root, no silent replacement, no index left by a run that indexed nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from indexes.schema import SIDECAR
from indexes.store import IndexStore
from tests.support.harness import kbgate


@pytest.fixture(name="cfg")
def _cfg(tmp_path: Path) -> Path:
    cfg = tmp_path / "c.toml"
    # lexical: these tests are about ids, roots and refusals (the hybrid default: tests/e2e/test_hybrid.py)
    cfg.write_text('[indexes]\ndir = "ix"\n[indexes.docs]\ndense = "none"\n[indexes.onlybin2]\ndense = "none"\n',
                   encoding="utf-8")
    return cfg


@pytest.fixture(name="src")
def _src(tmp_path: Path) -> Path:
    """src/a: guide/same.md and ops/run.md; src/a2: x.md."""
    src = tmp_path / "src"
    for rel, text in (("a/guide/same.md", "# 同名\n\n指南正文。\n"), ("a/ops/run.md", "# 运行\n\n运行正文。\n"),
                      ("a2/x.md", "# 旁边\n\n旁边的正文。\n")):
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text, encoding="utf-8")
    return src


def add(cfg: Path, *args: str, index: str = "docs") -> tuple[int, str, str]:
    r = kbgate("index", "add", "--config", str(cfg), "--index", index, "--no-progress", *args)
    return r.returncode, r.stdout, r.stderr


def ids(cfg: Path, index: str = "docs") -> list[str]:
    return sorted(IndexStore(cfg.parent / "ix").open(index).revisions())


def roots(cfg: Path, index: str = "docs") -> dict[str, str]:
    return dict(json.loads((cfg.parent / "ix" / index / SIDECAR).read_text(encoding="utf-8")).get("roots", {}))


def test_a_wider_run_after_a_sub_folder_is_refused_with_the_re_key_command(cfg: Path, src: Path) -> None:
    assert add(cfg, "--dataset", "ds1", str(src / "a" / "guide"))[0] == 0
    code, _, err = add(cfg, "--dataset", "ds1", str(src / "a"))
    assert code == 2 and f"holds {src / 'a' / 'guide'}" in err
    assert ids(cfg) == ["ds1:same.md"]  # no second copy of the same file
    rekey = f"--root {src / 'a'} --delete-missing {src / 'a'}"
    assert rekey in err
    code, out, _ = add(cfg, "--dataset", "ds1", *rekey.split())
    assert code == 0 and "2 added" in out and "1 deleted" in out
    assert ids(cfg) == ["ds1:guide/same.md", "ds1:ops/run.md"]
    assert roots(cfg) == {"ds1": str((src / "a").resolve())}


def test_a_sibling_folder_is_refused_and_the_recorded_root_stays(cfg: Path, src: Path) -> None:
    assert add(cfg, "--dataset", "ds1", str(src / "a"))[0] == 0
    code, _, err = add(cfg, "--dataset", "ds1", str(src / "a2"))
    assert code == 2 and "is outside" in err and f"--root {src / 'a2'} {src / 'a2'}" in err
    assert roots(cfg) == {"ds1": str((src / "a").resolve())}
    code, out, _ = add(cfg, "--dataset", "ds1", str(src / "a" / "guide"))
    assert code == 0 and "0 added" in out and "1 unchanged" in out
    assert ids(cfg) == ["ds1:guide/same.md", "ds1:ops/run.md"]
    # --root chooses the root of one run; the recorded root stays
    code, out, err = add(cfg, "--dataset", "ds1", "--root", str(src / "a2"), str(src / "a2"))
    assert code == 0 and "1 added" in out and "stays" in err
    assert roots(cfg) == {"ds1": str((src / "a").resolve())}


def test_a_run_that_indexed_nothing_records_no_root(cfg: Path, src: Path, tmp_path: Path) -> None:
    assert add(cfg, "--dataset", "ds1", str(src / "a"))[0] == 0
    other = tmp_path / "bin"
    other.mkdir()
    (other / "manual.pdf").write_bytes(b"%PDF-1.4")
    code, _, err = add(cfg, "--dataset", "ds2", str(other))
    assert code == 1 and "nothing was indexed" in err
    assert roots(cfg) == {"ds1": str((src / "a").resolve())}


def test_a_run_that_indexed_nothing_creates_no_index(cfg: Path, tmp_path: Path) -> None:
    only = tmp_path / "onlybin"
    only.mkdir()
    for name in ("a.pdf", "b.docx", "c.yaml"):
        (only / name).write_bytes(b"x")
    code, _, err = add(cfg, str(only), index="onlybin2")
    assert code == 1 and "nothing was indexed and no index was created" in err
    assert not (cfg.parent / "ix" / "onlybin2").exists()
    assert "no indexes under" in kbgate("index", "list", "--config", str(cfg)).stdout


def test_an_empty_folder_says_so_and_fails_unless_allowed(cfg: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = add(cfg, str(empty))
    assert code == 1 and f"{empty} holds no file at all; nothing was indexed" in err
    code, _, err = add(cfg, "--delete-missing", str(empty))
    assert code == 1 and "holds no file at all" in err and "held files" not in err
    assert add(cfg, "--allow-empty", str(empty))[0] == 0


def test_a_document_from_another_source_is_refused_unless_replace(cfg: Path, src: Path, tmp_path: Path) -> None:
    assert add(cfg, "--dataset", "ds1", str(src / "a"))[0] == 0
    rows = tmp_path / "r2.jsonl"
    rows.write_text('{"id":"ds1:guide/same.md","title":"别的","content":"JSONL 的内容"}\n', encoding="utf-8")
    code, out, err = add(cfg, "--dataset", "ds1", "--root", str(tmp_path), str(rows))
    assert code == 1 and "0 updated" in out
    assert f"was indexed from {(src / 'a' / 'guide' / 'same.md').resolve()}" in err
    assert f"comes from {rows.resolve()}" in err and "--replace" in err
    kept = IndexStore(cfg.parent / "ix").open("docs").get_document("ds1:guide/same.md")
    assert kept is not None and "指南正文" in kept.text
    code, out, err = add(cfg, "--dataset", "ds1", "--root", str(tmp_path), "--replace", str(rows))
    assert code == 0 and "1 updated" in out
    assert f"replaces 'ds1:guide/same.md' from {(src / 'a' / 'guide' / 'same.md').resolve()}" in err


def test_a_tree_document_from_another_folder_is_refused(cfg: Path, tmp_path: Path) -> None:
    for name in ("c", "d"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "none.md").write_text(f"# {name}\n\n{name} 的正文。\n", encoding="utf-8")
    assert add(cfg, str(tmp_path / "c"))[0] == 0
    code, _, err = add(cfg, "--root", str(tmp_path / "d"), str(tmp_path / "d"))
    assert code == 1 and f"was indexed from {(tmp_path / 'c' / 'none.md').resolve()}" in err
    kept = IndexStore(cfg.parent / "ix").open("docs").get_document("none.md")
    assert kept is not None and "c 的正文" in kept.text


def test_a_run_that_changes_nothing_makes_no_commit_and_says_so(cfg: Path, src: Path) -> None:
    def opstamp() -> int:
        return int(json.loads((cfg.parent / "ix" / "docs" / "meta.json").read_text(encoding="utf-8"))["opstamp"])

    code, out, _ = add(cfg, str(src / "a"))
    assert code == 0 and "2 added" in out and ", no commit" not in out
    first = opstamp()
    assert f"(generation {first})" in out
    code, out, _ = add(cfg, str(src / "a"))
    assert code == 0 and "2 unchanged" in out and f"(generation {first}, no commit)" in out
    assert opstamp() == first
