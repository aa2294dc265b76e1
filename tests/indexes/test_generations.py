"""indexes/generations.py: publishing an index's commit to a store as an immutable,
checksummed generation (objects named by SHA-256, a manifest, LATEST written last), pruning
old generations, and waiting for a running writer. Installing them: test_fetch.py."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from indexes.errors import IndexLockedError, IndexNotFoundError, SchemaVersionError
from indexes.generations import FORMAT, index_files, manifest_problem, publish
from indexes.schema import SCHEMA_VERSION, SIDECAR
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.documents import KB_DOCS
from tests.support.paths import ROOT
from tests.support.readonly_mount import read_only_argv


def doc(i: int) -> Document:
    """A document the i-th extra commit adds (found by 火星基地)."""
    return Document(f"extra-{i}", f"增补文档{i}", (Section("", f"第{i}次提交加入的内容：火星基地{i}号。"),),
                    dataset="kb")


@pytest.fixture(name="writer")
def _writer(tmp_path: Path) -> IndexStore:
    store = IndexStore(tmp_path / "writer")
    store.create_or_open_for_write("kb").ingest(KB_DOCS, progress=False)
    return store


def latest(store: Path) -> dict[str, str]:
    return dict(orjson.loads((store / "kb" / "LATEST").read_bytes()))


def test_a_generation_is_content_addressed_objects_a_manifest_and_latest(writer: IndexStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = publish(writer.folder("kb"), "kb", store)
    assert done.commit == writer.open("kb").commit and not done.already
    head = latest(store)
    raw = (store / "kb" / "generations" / f"{done.commit}.json").read_bytes()
    assert head == {"commit": done.commit, "manifest_sha256": hashlib.sha256(raw).hexdigest()}
    manifest = orjson.loads(raw)
    assert manifest["format"] == FORMAT and manifest["schema_version"] == SCHEMA_VERSION
    assert manifest_problem(manifest, "kb", done.commit) is None
    folder = writer.folder("kb")
    assert sorted(manifest["files"]) == index_files(folder)
    assert {"meta.json", ".managed.json", SIDECAR} <= set(manifest["files"])
    assert not [f for f in manifest["files"] if f.endswith(".lock")]  # locks are the replica's own
    for rel, f in manifest["files"].items():
        obj = store / "kb" / "objects" / f["sha256"][:2] / f["sha256"]
        assert obj.read_bytes() == (folder / rel).read_bytes()
        assert hashlib.sha256(obj.read_bytes()).hexdigest() == f["sha256"] and f["size"] == obj.stat().st_size
    assert not list(store.rglob("*.tmp"))


def test_publishing_again_copies_nothing_and_old_generations_are_pruned(writer: IndexStore, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = publish(writer.folder("kb"), "kb", store, keep=2)
    again = publish(writer.folder("kb"), "kb", store, keep=2)
    assert again.already and again.new_objects == 0 and again.commit == first.commit
    commits = [first.commit]
    for i in range(3):  # three more commits: the first two generations go
        writer.create_or_open_for_write("kb").ingest([*KB_DOCS, doc(i)], progress=False)
        done = publish(writer.folder("kb"), "kb", store, keep=2)
        assert 0 < done.new_objects < done.files  # only what the commit changed is copied
        commits.append(done.commit)
    assert len(set(commits)) == 4
    served = orjson.loads((store / "kb" / "generations" / f"{commits[-1]}.json").read_bytes())["files"]
    sha = min(f["sha256"] for f in served.values())  # an object the latest generation needs
    damaged = store / "kb" / "objects" / sha[:2] / sha
    damaged.write_bytes(b"x" * damaged.stat().st_size)  # same size, other bytes
    repaired = publish(writer.folder("kb"), "kb", store, keep=2)
    assert repaired.already and repaired.new_objects == 1  # publishing again repairs it
    assert hashlib.sha256(damaged.read_bytes()).hexdigest() == damaged.name
    kept = sorted(p.stem for p in (store / "kb" / "generations").glob("*.json"))
    assert kept == sorted(commits[-2:]) and latest(store)["commit"] == commits[-1]
    used = {f["sha256"] for c in kept
            for f in orjson.loads((store / "kb" / "generations" / f"{c}.json").read_bytes())["files"].values()}
    assert {p.name for p in (store / "kb" / "objects").glob("*/*")} == used  # nothing else is left


def test_publish_waits_for_a_running_writer(writer: IndexStore, tmp_path: Path) -> None:
    folder = writer.folder("kb")
    fd = os.open(folder / ".tantivy-writer.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as Tantivy's IndexWriter holds it
    try:
        with pytest.raises(IndexLockedError):
            publish(folder, "kb", tmp_path / "store", wait=0.3)
    finally:
        os.close(fd)
    assert not (tmp_path / "store" / "kb" / "LATEST").exists()
    assert publish(folder, "kb", tmp_path / "store", wait=0.3).files > 0


def test_publish_refuses_what_no_replica_could_serve(writer: IndexStore, tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError):
        publish(writer.folder("nope"), "nope", tmp_path / "store")
    (writer.folder("kb") / SIDECAR).write_text('{"schema_version": 1}', "utf-8")
    with pytest.raises(SchemaVersionError):
        publish(writer.folder("kb"), "kb", tmp_path / "store")
    assert not (tmp_path / "store" / "kb" / "LATEST").exists()


def test_vectors_of_older_generations_and_leftovers_are_not_published(tmp_path: Path) -> None:
    folder = tmp_path / "kb"
    (folder / "dense" / "g-3-aaaa").mkdir(parents=True)
    (folder / "dense" / "g-5-bbbb").mkdir()
    (folder / "dense" / ".g-6-cccc.tmp").mkdir()
    for p in ("meta.json", "x.idx", ".tantivy-meta.lock", ".tantivy-writer.lock", "dense/LOCK",
              "dense/g-3-aaaa/vectors.usearch", "dense/g-5-bbbb/vectors.usearch", "dense/g-5-bbbb/manifest.json",
              "dense/.g-6-cccc.tmp/vectors.usearch", ".kbgate-fetch.json"):
        (folder / p).write_bytes(b"x")
    (folder / "dense" / "CURRENT").write_bytes(orjson.dumps({"generation": 5, "folder": "g-5-bbbb"}))
    assert index_files(folder) == ["dense/CURRENT", "dense/g-5-bbbb/manifest.json", "dense/g-5-bbbb/vectors.usearch",
                                   "meta.json", "x.idx"]


@pytest.mark.parametrize(("change", "words"), [
    ({"format": 2}, "format 1"),
    ({"index": "other"}, "names index 'other'"),
    ({"schema_version": SCHEMA_VERSION - 1}, "schema version"),
    ({"files": {"meta.json": {"sha256": "0" * 64, "size": 1}}}, SIDECAR),
    ({"files": {"meta.json": {"sha256": "0" * 64, "size": 1}, SIDECAR: {"sha256": "0" * 64, "size": 1},
                "../../etc/passwd": {"sha256": "0" * 64, "size": 1}}}, "outside the index folder"),
    ({"files": {"meta.json": {"sha256": "0" * 64, "size": 1}, SIDECAR: {"sha256": "0" * 64, "size": 1},
                "/abs": {"sha256": "0" * 64, "size": 1}}}, "outside the index folder"),
    ({"files": {"meta.json": {"sha256": "zz", "size": 1}, SIDECAR: {"sha256": "0" * 64, "size": 1}}}, "sha256"),
    ({"files": {"meta.json": {"sha256": "0" * 64, "size": -1}, SIDECAR: {"sha256": "0" * 64, "size": 1}}}, "size"),
])
def test_manifest_problems_named(change: dict[str, object], words: str) -> None:
    good = {"format": FORMAT, "index": "kb", "commit": "7-0123456789ab", "schema_version": SCHEMA_VERSION,
            "files": {"meta.json": {"sha256": "0" * 64, "size": 1}, SIDECAR: {"sha256": "1" * 64, "size": 2}}}
    assert manifest_problem(good, "kb", "7-0123456789ab") is None
    problem = manifest_problem({**good, **change}, "kb", "7-0123456789ab")
    assert problem is not None and words in problem


def test_an_index_folder_mounted_read_only_is_published(writer: IndexStore, tmp_path: Path) -> None:
    code = ("import sys\nfrom pathlib import Path\nfrom indexes.generations import publish\n"
            "print(publish(Path(sys.argv[1]), 'kb', Path(sys.argv[2])).commit)")
    done = subprocess.run(read_only_argv(writer.root, [sys.executable, "-c", code, str(writer.folder("kb")),
                                                       str(tmp_path / "store")]),
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert latest(tmp_path / "store")["commit"] == done.stdout.strip()
