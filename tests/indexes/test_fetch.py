"""indexes/fetch.py: a replica installs published generations (indexes/generations.py) into its
own index folder; a running reader picks each up through its usual reload and never fails a
search meanwhile; a damaged, missing or foreign file is refused and the folder left as it was;
only what changed is downloaded; what the new commit does not use is deleted, the previous
vectors of a hybrid index kept. Over HTTP and as a command against real servers:
tests/e2e/test_replicas.py."""

from __future__ import annotations

import fcntl
import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from indexes.dense.index import HybridIndex, HybridStore
from indexes.dense.vectors import current_generation
from indexes.errors import GenerationError, IndexLockedError
from indexes.fetch import Fetched, FolderSource, fetch, fetch_record
from indexes.generations import publish
from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.indexes.dense.test_index import USE
from tests.support.documents import HYBRID_DOCS, KB_DOCS, PARAPHRASE


def doc(i: int) -> Document:
    """A document the i-th extra commit adds (found by 火星基地)."""
    return Document(f"extra-{i}", f"增补文档{i}", (Section("", f"第{i}次提交加入的内容：火星基地{i}号。"),),
                    dataset="kb")


class Env:
    """A writer's index folder, a store, and a replica's indexes root."""

    def __init__(self, tmp: Path) -> None:
        self.writer = IndexStore(tmp / "writer")
        self.store = tmp / "store"
        self.root = tmp / "replica"
        self.docs = list(KB_DOCS)

    def commit(self, *more: Document) -> str:
        self.docs += more
        self.writer.create_or_open_for_write("kb").ingest(self.docs, progress=False)
        return publish(self.writer.folder("kb"), "kb", self.store).commit

    def fetch(self) -> Fetched:
        return fetch(FolderSource(self.store), self.root, "kb")

    def objects(self) -> list[Path]:
        return sorted((self.store / "kb" / "objects").glob("*/*"))


@pytest.fixture(name="env")
def _env(tmp_path: Path) -> Env:
    return Env(tmp_path)


def test_a_running_reader_picks_up_each_fetched_commit(env: Env) -> None:
    first = env.commit()
    got = env.fetch()
    assert got.commit == first and got.previous is None and got.downloaded > 0
    reader = IndexStore(env.root).open("kb")
    assert reader.commit == first and not reader.search("火星基地", 5)
    second = env.commit(doc(1))
    got = env.fetch()
    assert (got.commit, got.previous) == (second, first)
    assert 0 < got.downloaded < got.downloaded + got.reused
    assert reader.maybe_reload(force=True)  # what every search does at most every 0.5 s
    assert [h.doc_id for h in reader.search("火星基地", 5)] == ["extra-1"]
    assert reader.commit == second == env.writer.open("kb").commit
    assert fetch_record(env.root / "kb")["commit"] == second
    assert env.fetch().already
    segment = next(p for p in (env.root / "kb").iterdir() if p.suffix == ".store")
    segment.unlink()  # damage under a commit that is fetched already: the same commit is fetched again
    again = env.fetch()
    assert not again.already and again.downloaded == 1 and segment.is_file() and again.commit == second


def test_searches_never_fail_while_commits_are_installed(env: Env) -> None:
    env.commit()
    env.fetch()
    reader = IndexStore(env.root).open("kb")
    errors: list[BaseException] = []
    seen: list[list[int]] = [[], [], []]
    stop = threading.Event()

    def search(mine: list[int]) -> None:
        while not stop.is_set():
            try:
                reader.maybe_reload(force=True)
                mine.append(len(reader.search("火星基地", 50)))
                assert reader.search("密钥轮换", 5)
            except BaseException as exc:  # noqa: BLE001  # every failure is the finding
                errors.append(exc)

    threads = [threading.Thread(target=search, args=(mine,)) for mine in seen]
    for t in threads:
        t.start()
    try:
        for i in range(8):
            env.commit(doc(i))
            env.fetch()
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    assert not errors, errors[:3]
    reader.maybe_reload(force=True)
    assert len(reader.search("火星基地", 50)) == 8
    for mine in seen:  # each thread saw commits in order, never an older one after a newer one
        assert len(mine) > 5 and mine == sorted(mine)
    # what the replica holds is exactly the last generation (and its own locks and record)
    commit = orjson.loads((env.store / "kb" / "LATEST").read_bytes())["commit"]
    listed = orjson.loads((env.store / "kb" / "generations" / f"{commit}.json").read_bytes())["files"]
    held = {p.relative_to(env.root / "kb").as_posix() for p in (env.root / "kb").rglob("*") if p.is_file()}
    assert held - set(listed) == {".tantivy-meta.lock", ".tantivy-writer.lock", ".kbgate-fetch.json"}
    assert set(listed) <= held


def flip_a_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def refused(env: Env, words: str, old: str) -> None:
    before = sorted(p.name for p in (env.root / "kb").iterdir())
    with pytest.raises(GenerationError) as exc:
        env.fetch()
    assert words in str(exc.value) and f"keeps serving commit {old}" in str(exc.value), str(exc.value)
    assert IndexStore(env.root).open("kb").commit == old
    assert sorted(p.name for p in (env.root / "kb").iterdir()) == before  # the live folder untouched
    assert not (env.root / ".fetch" / "kb").exists()  # nor a staging folder left


def test_a_corrupted_file_is_refused_by_its_checksum(env: Env) -> None:
    old = env.commit()
    env.fetch()
    new = env.commit(doc(1))
    changed = {p for p in env.objects() if p.stat().st_mtime_ns > (env.root / "kb" / "meta.json").stat().st_mtime_ns}
    victim = max(changed, key=lambda p: p.stat().st_size)
    flip_a_byte(victim)
    refused(env, "does not match its checksum", old)
    victim.write_bytes(victim.read_bytes()[:-1])  # truncated
    refused(env, "does not match its checksum", old)
    victim.unlink()
    refused(env, "is missing from the store", old)
    assert new != old


def test_a_damaged_or_foreign_manifest_is_refused(env: Env) -> None:
    old = env.commit()
    env.fetch()
    new = env.commit(doc(1))
    path = env.store / "kb" / "generations" / f"{new}.json"
    good = path.read_bytes()
    path.write_bytes(good.replace(b'"kbgate-index.json"', b'"kbgate-index.jsoN"'))
    refused(env, "does not have the checksum LATEST states", old)
    manifest = orjson.loads(good)
    manifest["schema_version"] = 1
    raw = orjson.dumps(manifest)
    path.write_bytes(raw)
    latest = env.store / "kb" / "LATEST"
    latest.write_bytes(orjson.dumps({"commit": new, "manifest_sha256": hashlib.sha256(raw).hexdigest()}))
    refused(env, "schema version 1", old)
    latest.write_bytes(b"not json")
    refused(env, "LATEST is not a JSON object", old)
    latest.unlink()
    refused(env, "nothing published", old)


def test_an_interrupted_fetch_leaves_the_old_commit(env: Env) -> None:
    old = env.commit()
    env.fetch()
    env.commit(doc(1))

    class Dies(FolderSource):  # a fetch killed in the middle of a download
        def read(self, path: str, write: Callable[[bytes], None]) -> None:
            if "/objects/" in path:
                write(b"x")
                raise KeyboardInterrupt
            super().read(path, write)

    with pytest.raises(KeyboardInterrupt):
        fetch(Dies(env.store), env.root, "kb")
    assert IndexStore(env.root).open("kb").commit == old
    staging = env.root / ".fetch" / "kb"
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "meta.json").write_bytes(b"half of a kill -9")  # what SIGKILL leaves
    assert env.fetch().commit != old
    assert not staging.exists()


def test_one_fetch_at_a_time_and_never_under_a_local_writer(env: Env) -> None:
    old = env.commit()
    env.fetch()
    env.commit(doc(1))
    fd = os.open(env.root / ".fetch" / "kb.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        refused(env, "another fetch of this index is running", old)
    finally:
        os.close(fd)
    fd = os.open(env.root / "kb" / ".tantivy-writer.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        with pytest.raises(IndexLockedError):
            env.fetch()
        assert IndexStore(env.root).open("kb").commit == old
    finally:
        os.close(fd)
    assert env.fetch().commit != old


def test_a_file_changed_on_the_replica_is_downloaded_again(env: Env) -> None:
    env.commit()
    env.fetch()
    env.commit(doc(1))
    sidecar = env.root / "kb" / "kbgate-index.json"  # unchanged by the new commit
    assert sidecar.read_bytes() == (env.writer.folder("kb") / "kbgate-index.json").read_bytes()
    flip_a_byte(sidecar)  # same size, other bytes: its recorded hash no longer holds
    env.fetch()
    assert sidecar.read_bytes() == (env.writer.folder("kb") / "kbgate-index.json").read_bytes()


def test_hybrid_vectors_arrive_with_their_commit(tmp_path: Path) -> None:
    writer = HybridStore(tmp_path / "writer", dense={"kb": USE})
    docs = list(HYBRID_DOCS)
    writer.create_or_open_for_write("kb").ingest(docs, progress=False)
    publish(writer.folder("kb"), "kb", tmp_path / "store")
    fetch(FolderSource(tmp_path / "store"), tmp_path / "replica", "kb")
    replica = HybridStore(tmp_path / "replica", dense={"kb": USE})
    ix = replica.open("kb")
    assert isinstance(ix, HybridIndex)
    try:
        ix.embedder.warm()
        assert ix.search(PARAPHRASE, 3)[0].doc_id == "pw" and ix.dense.counters == {"hybrid": 1}
        first = current_generation(tmp_path / "replica" / "kb")
        assert first is not None
        for i in range(2):  # two more commits: the vectors of the first are pruned, the previous kept
            docs.append(Document(f"n{i}", f"新页面{i}", (Section("", f"扩容第{i}步"),), dataset="public"))
            writer.create_or_open_for_write("kb").ingest(docs, progress=False)
            publish(writer.folder("kb"), "kb", tmp_path / "store")
            fetch(FolderSource(tmp_path / "store"), tmp_path / "replica", "kb")
        ix.maybe_reload(force=True)
        assert ix.search(PARAPHRASE, 3)[0].doc_id == "pw" and ix.dense.counters == {"hybrid": 2}
        now = current_generation(tmp_path / "replica" / "kb")
        assert now is not None and now[0] == ix.generation
        folders = sorted(p.name for p in (tmp_path / "replica" / "kb" / "dense").iterdir() if p.is_dir())
        assert first[1] not in folders and now[1] in folders and len(folders) == 2
    finally:
        replica.close()
