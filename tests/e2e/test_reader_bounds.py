"""Document readers within bounds, end to end: a real `kbgate serve` (one worker, a real Redis)
takes the tester's attack files through the document API's PUT. Each is refused with a 413
naming the limit it passed, the worker's resident memory stays where it was (the parse ran in a
reader process of its own), and an ordinary document is written after them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from indexes.store import IndexStore
from indexes.types import Document, Section
from tests.support.configs import ENV, client, config, write
from tests.support.files import deep_rst, empty_runs_docx
from tests.support.harness import Server, free_port, serve

CMS = "cms-webhook-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {CMS}"}
BASE = "/documents/v1/indexes/live"
MIB = 1024 * 1024
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def _config(root: Path, port: int, redis_url: str, indexes: dict[str, object]) -> Path:
    IndexStore(root / "indexes").create_or_open_for_write("live").ingest(
        [Document("seed", "Seed", (Section("", "The first document."),))], progress=False)
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "live"}},
             "clients": {"cms": client("c1", CMS, ["support"], ["documents.write", "search"],
                                       write_indexes=["live"], datasets=["*"], path_globs=["**"])}}
    data = config(root, indexes=root / "indexes", port=port, workers=1, redis_url=redis_url,
                  key_prefix=f"kbgate-bounds-{port}", agent=agent, audit={"sink": "off"},
                  documents={"max_body_bytes": 16 * MIB}, lexical=["live"])
    data["indexes"].update(indexes)
    return write(root / "gateway.toml", data)


@pytest.fixture(name="server")
def _server(tmp_path: Path, redis_url: str, request: pytest.FixtureRequest) -> Iterator[Server]:
    port = free_port()
    with serve(_config(tmp_path, port, redis_url, request.param), port=port, env=ENV) as srv:
        yield srv


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


def _refused(c: httpx.Client, doc_id: str, data: bytes, content_type: str) -> str:
    r = c.put(f"{BASE}/documents/{doc_id}", content=data, headers={**AUTH, "content-type": content_type})
    assert r.status_code == 413, (r.status_code, r.text)
    err = r.json()["errors"][0]
    assert err["code"] == "documents.document_too_large", err
    message: str = err["message"]
    return message


@pytest.mark.parametrize("server", [{}], indirect=True)
def test_the_attacks_are_refused_before_parsing_naming_the_limit(server: Server) -> None:
    with httpx.Client(base_url=server.base, timeout=60) as c:
        assert "indexes.max_nesting" in _refused(c, "deep.rst", deep_rst(3000), "text/x-rst")
        assert "indexes.max_markup_elements" in _refused(c, "runs.docx", empty_runs_docx(2_000_000), DOCX)


@pytest.mark.parametrize("server", [{"max_nesting": 10_000, "max_markup_elements": 10**9,
                                     "reader_memory_bytes": 256 * MIB, "reader_cpu_seconds": 2}], indirect=True)
def test_a_parse_past_its_memory_or_cpu_leaves_the_worker_where_it_was(server: Server) -> None:
    [worker] = server.workers()
    with httpx.Client(base_url=server.base, timeout=120) as c:
        r = c.put(f"{BASE}/documents/warm.md", content=b"# Warm\n\nfirst write\n",
                  headers={**AUTH, "content-type": "text/markdown"})
        assert r.status_code == 200, r.text
        before = _rss(worker)
        for _ in range(3):  # three at a time took a worker to 3.7 GiB
            message = _refused(c, "deep.rst", deep_rst(3000), "text/x-rst")
            assert "indexes.reader_memory_bytes" in message and str(256 * MIB) in message, message
        message = _refused(c, "runs.docx", empty_runs_docx(2_000_000), DOCX)
        assert "indexes.reader_cpu_seconds" in message and "2 s of CPU" in message, message
        assert _rss(worker) - before < 64 * MIB
        r = c.put(f"{BASE}/documents/after.md", content=b"# After\n\nstill writes\n",
                  headers={**AUTH, "content-type": "text/markdown"})
        assert r.status_code == 200 and r.json()["data"]["documents"][0]["change"] == "added", r.text
    assert server.workers() == [worker]
