"""`kbgate sync` from a folder (gateway/sync/folder.py): a change picked up without a rebuild,
unchanged files not re-read, ids equal to `kbgate index add`'s."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.harness import kbgate
from tests.support.paths import ROOT
from tests.support.readonly_mount import read_only_argv
from tests.sync.helpers import counts, generation, ids, search_ids, sync, write_config


def _folder(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "guide").mkdir(parents=True)
    (docs / "a.md").write_text("# 甲\n\n甲的正文讲密钥。\n", encoding="utf-8")
    (docs / "guide" / "b.md").write_text("# 乙\n\n乙的正文讲证书。\n", encoding="utf-8")
    (docs / "rows.jsonl").write_text('{"id": "r1", "title": "行一", "content": "第一行"}\n'
                                     '{"id": "r2", "title": "行二", "content": "第二行"}\n', encoding="utf-8")
    return docs


def test_folder_sync_picks_up_changes_without_a_rebuild(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"\ndataset = "ds"')
    r = sync(cfg)
    assert r.returncode == 0, r.stderr
    assert counts(r.stdout) == (4, 0, 0, 0)
    added = kbgate("index", "add", "--config", str(cfg), "--index", "ref", "--dataset", "ds", "--no-progress",
                   str(docs))
    assert added.returncode == 0 and ids(cfg, "ref") == ids(cfg) == ["ds:a.md", "ds:guide/b.md", "r1", "r2"]

    before = generation(cfg)
    os.utime(docs / "a.md", ns=(time.time_ns(), time.time_ns() + 5_000_000_000))  # touched, not changed
    r = sync(cfg)
    assert counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before and "0 read, 3 unchanged" in r.stdout

    (docs / "a.md").write_text("# 甲\n\n甲的正文改讲轮换。\n", encoding="utf-8")
    (docs / "guide" / "b.md").unlink()
    (docs / "c.md").write_text("# 丙\n\n丙是新的。\n", encoding="utf-8")
    (docs / "rows.jsonl").write_text('{"id": "r1", "title": "行一", "content": "第一行"}\n', encoding="utf-8")
    r = sync(cfg)
    assert counts(r.stdout) == (1, 1, 1, 2)  # c added, a updated, r1 unchanged, b and r2 deleted
    assert ids(cfg) == ["ds:a.md", "ds:c.md", "r1"]
    assert "ds:guide/b.md" not in search_ids(cfg, "证书")
    assert search_ids(cfg, "轮换")[:1] == ["ds:a.md"]

    r = sync(cfg, "--dry-run")
    assert "would add 0, update 0, delete 0" in r.stdout


def test_sync_every_runs_again_until_stopped(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"')
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "sync", "--config", str(cfg), "--no-progress",
                             "--every", "1s"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "ix" / "docs" / "kbgate-sync.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        (docs / "new.md").write_text("# 新\n\n运行中加入的页面。\n", encoding="utf-8")
        while time.monotonic() < deadline:
            try:
                if "new.md" in ids(cfg):
                    break
            except Exception:
                pass
            time.sleep(0.2)
        assert "new.md" in ids(cfg)  # picked up by a later round, no rebuild
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert out.count("index docs:") >= 2


def test_sync_refuses_bad_usage(tmp_path: Path) -> None:
    cfg = write_config(tmp_path)
    r = sync(cfg)
    assert r.returncode == 2 and "no sync source" in r.stderr
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{tmp_path}"')
    r = sync(cfg, "--every", "soon")
    assert r.returncode == 2 and "is not a duration" in r.stderr


def test_a_document_indexed_from_elsewhere_is_reported_the_rest_applied_and_tried_again(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("# 甲\n\n另一个副本。\n", encoding="utf-8")
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"\ndataset = "ds"')
    added = kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--dataset", "ds", "--no-progress",
                   str(other))
    assert added.returncode == 0 and ids(cfg) == ["ds:a.md"]
    before = generation(cfg)

    r = sync(cfg)
    assert r.returncode == 1
    assert "skipped a.md: id 'ds:a.md' was indexed from" in r.stderr and "--replace" in r.stderr
    assert counts(r.stdout) == (3, 0, 0, 0) and generation(cfg) > before  # the rest applied
    before = generation(cfg)
    assert ids(cfg) == ["ds:a.md", "ds:guide/b.md", "r1", "r2"] and search_ids(cfg, "副本") == ["ds:a.md"]

    r = sync(cfg)  # the source kept its recorded state: a.md is read and refused again, nothing else changes
    assert r.returncode == 1 and "skipped a.md" in r.stderr
    assert counts(r.stdout) == (0, 0, 3, 0) and generation(cfg) == before and ", no commit)" in r.stdout

    r = sync(cfg, "--replace")
    assert r.returncode == 0, r.stderr
    assert counts(r.stdout) == (0, 1, 3, 0) and "replaces 'ds:a.md'" in r.stderr
    assert search_ids(cfg, "密钥") == ["ds:a.md"] and search_ids(cfg, "副本") == []


def test_a_sync_into_a_read_only_index_folder_is_refused_naming_it(tmp_path: Path) -> None:
    docs = _folder(tmp_path)
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"\ndataset = "ds"')
    assert sync(cfg).returncode == 0
    (docs / "c.md").write_text("# 丙\n\n丙的正文。\n", encoding="utf-8")
    before = generation(cfg)
    r = subprocess.run(read_only_argv(tmp_path / "ix", [sys.executable, "-m", "gateway.cli", "sync", "--config",
                                                        str(cfg), "--no-progress"]),
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert f"Index 'docs' at {tmp_path / 'ix' / 'docs'} is on a read-only folder" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "delete" not in r.stderr
    assert generation(cfg) == before and "ds:c.md" not in ids(cfg)


def test_hostile_file_names_are_refused_or_shown_escaped_by_index_add_and_sync(tmp_path: Path) -> None:
    """File names holding ESC/OSC or a line break reached the operator's terminal raw in the
    skipped/warning lines, and a line break forged a report line; a file named 'a\\..\\config\\x.md'
    and a JSONL record with path 'a/../config/x' were indexed. Each report line now shows such
    characters as visible escapes (indexes.invisible.shown), and the walks are refused."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "ok.md").write_text("# 好\n\n正常的正文。\n", encoding="utf-8")
    (docs / "t\x1b]0;owned\x07.md").write_text("# 标题\n\n终端标题。\n", encoding="utf-8")
    (docs / "x\nindex docs: 99 added.txt").write_text("伪造的一行。\n", encoding="utf-8")
    (docs / "e\x1b[31m.doc").write_bytes(b"\xd0\xcf")  # unsupported: a warning naming it
    (docs / "a\\..\\config\\x.md").write_text("# 秘密\n\n配置里的秘密。\n", encoding="utf-8")
    (docs / "rows.jsonl").write_text('{"id": "r1", "content": "越界", "path": "a/../config/x"}\n'
                                     '{"id": "../r2", "content": "越界二"}\n', encoding="utf-8")
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"')
    added = kbgate("index", "add", "--config", str(cfg), "--index", "ref", "--no-progress", str(docs))
    synced = sync(cfg)
    for run in (added, synced):
        out = run.stdout + run.stderr
        assert "\x1b" not in out and "\x07" not in out, out
        assert not any(line.startswith("index docs: 99") for line in out.splitlines()), out
        assert "t\\x1b]0;owned\\x07.md" in out and "x\\x0aindex docs: 99 added.txt" in out
        assert "e\\x1b[31m.doc" in out
        assert "a\\..\\config\\x.md: file 'id' has a '.' or '..' segment" in out, out
        assert "'path' has a '.' or '..' segment" in out and "'id' has a '.' or '..' segment" in out
        assert run.returncode == 1
    assert ids(cfg, "ref") == ids(cfg) == ["ok.md"]


def test_a_full_disk_is_said_by_index_add_and_sync(tmp_path: Path) -> None:
    """On a real full filesystem both ended in a traceback ("ValueError: An IO error occurred:
    'No space left on device (os error 28)'", or "An index writer was killed")."""
    from tests.support.full_disk import on_full_disk

    docs = _folder(tmp_path)
    (docs / "big.md").write_text("# 大\n\n" + "磁盘写满时的正文。" * 40_000, encoding="utf-8")
    cfg = write_config(tmp_path, f'name = "local"\ntype = "folder"\npath = "{docs}"')
    cli = [sys.executable, "-m", "gateway.cli"]
    for args in (["index", "add", "--config", str(cfg), "--index", "docs", "--no-progress", str(docs)],
                 ["sync", "--config", str(cfg), "--no-progress"]):
        for seeded in (False, True):  # a new index (created on the full disk), then one that exists
            seed = tmp_path / "seed"
            if seeded and not seed.exists():
                assert kbgate("index", "add", "--config", str(cfg), "--index", "docs", "--no-progress",
                              str(docs / "a.md")).returncode == 0
                (tmp_path / "ix").rename(seed)
            r = subprocess.run(on_full_disk(tmp_path / "ix", [*cli, *args], seed=seed if seeded else None),
                               capture_output=True, text=True, cwd=ROOT, timeout=300)
            assert r.returncode == 1, (args, r.stdout, r.stderr)
            assert "disk full" in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
