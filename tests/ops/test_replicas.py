"""gateway/ops/replicas.py: the HTTP(S) store source against a real server, the commands' usage
errors, `--every` following new commits, and check-config's commit line. The whole path with a
second `kbgate serve`: tests/e2e/test_replicas.py."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.ops.replicas import HttpSource, commit_line, safe_url, source_for
from indexes.fetch import FolderSource, fetch
from indexes.generations import publish
from indexes.stats import read_commit
from indexes.store import IndexStore
from indexes.types import Document, Section, SourceMissing
from tests.support.configs import ENV, config, write
from tests.support.documents import KB_DOCS
from tests.support.harness import Server, free_port, kbgate
from tests.support.paths import ROOT
from tests.support.store_server import store_server


@pytest.fixture(name="published", scope="module")
def _published(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store holding one generation of index kb (the store's root)."""
    root = tmp_path_factory.mktemp("published")
    writer = IndexStore(root / "writer")
    writer.create_or_open_for_write("kb").ingest(KB_DOCS, progress=False)
    publish(writer.folder("kb"), "kb", root / "store")
    return root / "store"


@pytest.fixture(name="http", scope="module")
def _http(published: Path) -> Iterator[Server]:
    with store_server(published) as srv:
        yield srv


def test_http_source_reads_what_the_folder_holds(published: Path, http: Server) -> None:
    got: list[bytes] = []
    HttpSource(http.base + "/").read("kb/LATEST", got.append)
    assert b"".join(got) == (published / "kb" / "LATEST").read_bytes()
    with pytest.raises(SourceMissing):
        HttpSource(http.base).read("kb/generations/9-000000000000.json", got.append)
    port = free_port()  # nothing listens there
    with pytest.raises(OSError, match=f"ConnectError reading http://127.0.0.1:{port}/kb/LATEST"):
        HttpSource(f"http://127.0.0.1:{port}").read("kb/LATEST", got.append)
    with pytest.raises(OSError, match="InvalidURL"):
        HttpSource("http://127.0.0.1:1:2").read("kb/LATEST", got.append)


def test_a_fetch_over_http_equals_one_from_the_folder(published: Path, http: Server, tmp_path: Path) -> None:
    over_http = fetch(source_for(http.base), tmp_path / "a", "kb")
    from_folder = fetch(source_for(str(published)), tmp_path / "b", "kb")
    assert over_http.commit == from_folder.commit == read_commit(tmp_path / "a" / "kb")[1]
    files = sorted(p.relative_to(tmp_path / "a").as_posix() for p in (tmp_path / "a" / "kb").rglob("*"))
    assert files == sorted(p.relative_to(tmp_path / "b").as_posix() for p in (tmp_path / "b" / "kb").rglob("*"))
    assert isinstance(source_for(str(published)), FolderSource)


def test_store_urls_are_named_without_credentials() -> None:
    assert safe_url("https://user:Pw99@store.example.com/kb?X-Amz-Signature=abc#x") == "https://store.example.com/kb"
    assert HttpSource("https://u:Pw99@h/s/").describe() == "https://h/s"


def test_usage_errors_exit_2(published: Path, tmp_path: Path) -> None:
    cfg = write(tmp_path / "gateway.toml", config(tmp_path))
    for args, words in ((("publish", "--keep", "0", str(tmp_path / "s")), "--keep"),
                        (("publish", "http://example.com/store"), "publish writes to a folder"),
                        (("fetch", "--every", "0.5", str(published)), "--every")):
        r = kbgate("index", args[0], "--config", str(cfg), "--index", "kb", *args[1:])
        assert r.returncode == 2 and words in r.stderr, r.stderr


def test_fetch_every_follows_new_commits_and_check_config_names_them(tmp_path: Path) -> None:
    writer = IndexStore(tmp_path / "writer")
    docs = list(KB_DOCS)
    writer.create_or_open_for_write("kb").ingest(docs, progress=False)
    store = tmp_path / "store"
    first = publish(writer.folder("kb"), "kb", store).commit
    (tmp_path / "replica").mkdir()
    cfg = write(tmp_path / "replica" / "gateway.toml", config(tmp_path / "replica"))
    folder = tmp_path / "replica" / "indexes" / "kb"
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "index", "fetch", "--config", str(cfg),
                             "--index", "kb", "--every", "1", str(store)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        commits = [first]
        for i in range(2):
            deadline = time.monotonic() + 60
            while read_commit(folder)[1] != commits[-1] and time.monotonic() < deadline:
                time.sleep(0.1)
            assert read_commit(folder)[1] == commits[-1]
            docs.append(Document(f"n{i}", f"新页面{i}", (Section("", f"第{i}页"),), dataset="kb"))
            writer.create_or_open_for_write("kb").ingest(docs, progress=False)
            commits.append(publish(writer.folder("kb"), "kb", store).commit)
        deadline = time.monotonic() + 60
        while read_commit(folder)[1] != commits[-1] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert read_commit(folder)[1] == commits[-1]
    finally:
        proc.send_signal(signal.SIGTERM)  # a pod stopping: the fetch under way completes, then exit 0
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    for c in commits:
        assert f"fetched commit {c} from {store}" in out, out + err
    line = commit_line(folder, "kb")
    assert line is not None and line.startswith(f"index kb: commit {commits[-1]} (fetched from {store} at ")
    check = kbgate("check-config", "--config", str(cfg), env=ENV)
    assert line in check.stdout, check.stdout
