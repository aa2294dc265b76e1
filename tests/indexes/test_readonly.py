"""Index folders served read-only, as the shipped deployment mounts them (compose `:ro`,
Kubernetes `readOnly: true`): a reader in a mount namespace where the folder is a read-only
bind mount (tests/support/readonly_mount.py) opens, searches, checks and follows the commits
a writer outside makes, without a write of its own; a write there is refused naming the
folder; no message calls a healthy read-only index damaged or advises deleting it."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from indexes.dense.config import DenseConfig
from indexes.dense.index import HybridStore
from indexes.errors import IndexReadOnlyError
from indexes.readonly import SHADOW_PREFIX, Shadow, pid_namespace, read_only, sweep
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.documents import HYBRID_DOCS, PARAPHRASE
from tests.support.paths import ROOT
from tests.support.readonly_mount import read_only_argv

# The reader: one line of JSON in (an op), one line of JSON out, in the read-only namespace.
READER = r"""
import json, sys, tempfile, os
from pathlib import Path
from indexes.dense.config import DenseConfig
from indexes.dense.index import HybridStore
from indexes.errors import IndexStoreError
root, hybrid = Path(sys.argv[1]), sys.argv[2] == "hybrid"
dense = {"kb": DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=20_000)} if hybrid else {}
store = HybridStore(root, dense=dense)
for line in sys.stdin:
    op = json.loads(line)
    out = {}
    try:
        if op["op"] == "search":
            ix = store.open("kb")
            if hybrid:
                ix.embedder.warm()
            hits = ix.search(op["q"], 10)  # the loop below adds six matching documents
            out = {"ids": [h.doc_id for h in hits], "generation": ix.generation, "commit": ix.commit,
                   "counters": dict(getattr(getattr(ix, "dense", None), "counters", {}))}
        elif op["op"] == "check":
            store.check("kb")
            out = {"ok": True}
        elif op["op"] == "write":
            store.create_or_open_for_write(op["name"])
            out = {"ok": True}
        elif op["op"] == "shadows":
            out = {"shadows": [p.name for p in Path(tempfile.gettempdir()).glob("kbgate-ro-*-%d-*" % os.getpid())]}
        elif op["op"] == "close":
            store.close()
            out = {"ok": True}
    except IndexStoreError as exc:
        out = {"error": type(exc).__name__, "reason": exc.reason, "message": str(exc)}
    print(json.dumps(out), flush=True)
"""


class Reader:
    """The READER process over a read-only bind mount of `root` (one per test)."""

    def __init__(self, root: Path, *, hybrid: bool = False) -> None:
        self.proc = subprocess.Popen(read_only_argv(root, [sys.executable, "-c", READER, str(root),
                                                           "hybrid" if hybrid else "lexical"]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, cwd=ROOT)

    def ask(self, **op: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(op) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, self.stop()
        answer: dict[str, Any] = json.loads(line)
        return answer

    def stop(self) -> str:
        """Close its input, wait for it; its stderr."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        return self.proc.stderr.read()


def _doc(doc_id: str, text: str) -> Document:
    return Document(doc_id, f"标题{doc_id}", (Section("", text),))


@pytest.fixture(name="reader")
def _reader(tmp_path: Path) -> Iterator[tuple[IndexStore, Reader]]:
    store = IndexStore(tmp_path / "indexes")
    store.create_or_open_for_write("kb").ingest([_doc("a", "苹果是一种水果。"), _doc("b", "香蕉是一种黄色的水果。")],
                                               progress=False)
    reader = Reader(store.root)
    yield store, reader
    if reader.proc.poll() is None:
        reader.stop()


def test_a_read_only_folder_is_searched_checked_and_follows_every_new_commit(
        reader: tuple[IndexStore, Reader]) -> None:
    store, ro = reader
    first = ro.ask(op="search", q="水果")
    assert sorted(first["ids"]) == ["a", "b"], first
    assert ro.ask(op="check") == {"ok": True}
    writer = store.create_or_open_for_write("kb")
    seen = [first["generation"]]
    for i in range(6):  # commits that add, replace and delete: Tantivy merges and removes old segment files
        writer.ingest([_doc(f"n{i}", f"第{i}种水果是橙子。"), _doc("a", f"苹果第{i}版。")], progress=False)
        time.sleep(0.6)  # past the reader's RELOAD_CHECK_SECONDS
        now = ro.ask(op="search", q="橙子")
        assert f"n{i}" in now["ids"] and now["generation"] > seen[-1], now
        assert now["commit"] == f"{now['generation']}-" + now["commit"].split("-")[1]
        seen.append(now["generation"])
    assert ro.ask(op="check") == {"ok": True}
    shadows = ro.ask(op="shadows")["shadows"]  # the served index's, and the one checks refresh
    assert len(shadows) == 2 and all(s.startswith(SHADOW_PREFIX) for s in shadows), shadows
    assert ro.ask(op="close") == {"ok": True} and ro.ask(op="shadows") == {"shadows": []}
    errors = ro.stop()
    assert "Error" not in errors and "Traceback" not in errors, errors
    assert not list((store.root / "kb").glob("*.tmp"))


def test_a_write_on_a_read_only_folder_is_refused_naming_it(reader: tuple[IndexStore, Reader]) -> None:
    store, ro = reader
    for name, where in (("kb", store.root / "kb"), ("new", store.root / "new")):
        refused = ro.ask(op="write", name=name)
        assert refused["error"] == "IndexReadOnlyError" and refused["reason"] == "read-only", refused
        assert f"at {where} is on a read-only folder" in refused["message"]
        assert "delete" not in refused["message"] and "damaged" not in refused["message"]
    assert not (store.root / "new").exists()
    assert ro.ask(op="search", q="苹果")["ids"] == ["a"]  # still served


def test_a_hybrid_index_is_served_from_a_read_only_folder(tmp_path: Path) -> None:
    use = DenseConfig(provider="local", model="use-multilingual-v3", query_timeout_ms=20_000)
    writer = HybridStore(tmp_path, dense={"kb": use}).create_or_open_for_write("kb")
    writer.ingest(HYBRID_DOCS, progress=False)
    ro = Reader(tmp_path, hybrid=True)
    try:
        found = ro.ask(op="search", q=PARAPHRASE)
        assert found["ids"][0] == "pw" and found["counters"] == {"hybrid": 1}, found
        writer.ingest([Document("tea", "泡茶", (Section("", "绿茶用八十度的水冲泡三分钟。"),), dataset="public")],
                      progress=False)
        time.sleep(0.6)
        after = ro.ask(op="search", q="绿茶怎么泡")
        assert after["ids"][0] == "tea" and after["counters"] == {"hybrid": 2}, after
        assert after["generation"] > found["generation"]
    finally:
        errors = ro.stop()
        writer.close()
    assert "Traceback" not in errors, errors


def test_a_writable_folder_needs_no_shadow_and_a_shadow_follows_its_source(tmp_path: Path) -> None:
    store = IndexStore(tmp_path)
    store.create_or_open_for_write("kb").ingest([_doc("a", "苹果是一种水果。")], progress=False)
    assert not read_only(tmp_path / "kb")
    shadow = Shadow(tmp_path / "kb", "kb")
    assert shadow.refresh() is True
    try:
        assert (shadow.path / "meta.json").read_bytes() == (tmp_path / "kb" / "meta.json").read_bytes()
        assert not (shadow.path / "meta.json").is_symlink()
        linked = {p.name for p in shadow.path.iterdir() if p.is_symlink()}
        assert ".managed.json" in linked and not {n for n in linked if n.endswith(".lock")}
        assert shadow.refresh() is False
        store.create_or_open_for_write("kb").ingest([_doc("b", "香蕉。")], progress=False)
        assert shadow.refresh() is True
        assert all(p.resolve().exists() for p in shadow.path.iterdir() if p.is_symlink())
    finally:
        shadow.close()
    assert not shadow.path.exists()


def test_shadows_of_dead_processes_are_swept(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    ns = pid_namespace()
    stale = tmp_path / f"{SHADOW_PREFIX}{ns}-{dead.stdout.strip()}-kb-x1"
    stale.mkdir()
    (stale / "meta.json").write_text("{}")
    alive = tmp_path / f"{SHADOW_PREFIX}{ns}-1-kb-x2"  # pid 1 lives
    elsewhere = tmp_path / f"{SHADOW_PREFIX}1{ns}-{dead.stdout.strip()}-kb-x3"  # another PID namespace's
    alive.mkdir()
    elsewhere.mkdir()
    assert sweep(tmp_path) == 1
    assert not stale.exists() and alive.exists() and elsewhere.exists()


def test_a_read_only_error_is_not_damage(tmp_path: Path) -> None:
    exc = IndexReadOnlyError("kb", str(tmp_path))
    assert exc.reason == "read-only" and "delete" not in str(exc)
