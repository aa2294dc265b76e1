"""gateway/core/retrieve.py: the one scoped search and read, against the test index."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

import pytest

from gateway.core import retrieve
from gateway.core.errors import DependencyUnavailable
from gateway.core.runtime import Runtime
from gateway.core.scope import Grant, Principal, ScopeRequest, effective_scope
from indexes.types import Hit, SearchFilter
from tests.support.configs import config, parse

P = Principal("agent_client", "tester")


def scope(index: str = "docs", **grant: Any) -> Any:
    return effective_scope(P, ("r",), index, [Grant(**grant)], ScopeRequest())


@pytest.fixture(name="rt")
def _rt(docs_index: Path, tmp_path: Path) -> Runtime:
    return Runtime(parse(config(tmp_path, tenants=[], indexes=docs_index), tmp_path))


@pytest.mark.anyio
async def test_search_is_inside_the_scope_best_first(rt: Runtime) -> None:
    found = await retrieve.search(rt, scope(datasets=("public",)), "密钥轮换", 10, summary_chars=50, content_chars=80)
    assert found.hits and all(h.dataset == "public" for h in found.hits)
    assert [h.score for h in found.hits] == sorted((h.score for h in found.hits), reverse=True)
    assert not any(h.path.startswith(("config/", "state/", "working/")) for h in found.hits)
    assert all(len(h.summary) <= 50 and len(h.content) <= 80 for h in found.hits)
    assert found.took_ms >= 0 and found.generation is None
    assert (await retrieve.search(rt, scope(), "密钥轮换", 3, summary_chars=50, content_chars=1,
                                  with_generation=True)).generation == retrieve.generation(rt, scope())


@pytest.mark.anyio
async def test_floor_drops_hits_and_never_replaces_them(rt: Runtime) -> None:
    query = "部署时轮换密钥的步骤"  # matched to a different degree by several pages
    everything = (await retrieve.search(rt, scope(), query, 10, summary_chars=50, content_chars=1)).hits
    assert all(0.0 <= h.relevance <= 1.0 and h.scores.bm25 == h.score for h in everything)
    bar = max(h.relevance for h in everything)
    kept = (await retrieve.search(rt, scope(), query, 10, summary_chars=50, content_chars=1, floor=bar)).hits
    assert [(h.id, h.relevance) for h in kept] == [(h.id, h.relevance) for h in everything if h.relevance >= bar]
    assert 0 < len(kept) < len(everything)


@pytest.mark.anyio
async def test_every_hit_is_rechecked_against_the_scope(rt: Runtime, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index whose filter let through everything (the re-check is defence in depth): the
    re-check as written (`scope.allows`) keeps only the hits inside the scope, refusing each of
    a dataset outside it, a path outside its globs and an excluded tree (config/, state/, working/)."""
    idx = rt.index("docs")
    answer = idx.answer

    def leaky(query: str, limit: int, *, filter: SearchFilter, **kw: Any) -> tuple[list[Hit], int | None]:
        return answer(query, limit, filter=SearchFilter(), **kw)

    monkeypatch.setattr(idx, "answer", leaky)
    query = "密钥轮换 随机串"
    leaked, _ = leaky(query, 20, filter=SearchFilter(), one_per_document=True, summary_chars=50, content_chars=1)
    paths = {(h.path, h.dataset) for h in leaked}
    assert ("guide/replay.md", "internal") in paths and ("ops/deploy.md", "public") in paths
    assert {"config/secrets.md", "state/manifest.md", "working/draft.md"} <= {p for p, _ in paths}
    excluded = ("config/", "state/", "working/")
    for inside, rule in ((scope(datasets=("public",), path_globs=("guide/**",)),
                          lambda h: h.dataset == "public" and h.path.startswith("guide/")),
                         (scope(datasets=("public",)),
                          lambda h: h.dataset == "public" and not h.path.startswith(excluded))):
        kept = [h.id for h in leaked if rule(h)]
        assert kept and len(kept) < len(leaked)
        hits = (await retrieve.search(rt, inside, query, 20, summary_chars=50, content_chars=1)).hits
        assert [h.id for h in hits] == kept, inside.filter


@pytest.mark.anyio
async def test_search_many_merges_best_first_one_per_document_and_lists_failures(rt: Runtime) -> None:
    targets = [retrieve.Target("guide", scope(path_globs=("guide/**",))),
               retrieve.Target("all", scope()),
               retrieve.Target("gone", scope("absent"))]
    merged = await retrieve.search_many(rt, targets, "密钥轮换", 5, summary_chars=50, content_chars=1)
    docs = [h.doc_id for _, h in merged.hits]
    assert len(docs) == len(set(docs)) <= 5  # the same document through two routes appears once
    assert [h.relevance for _, h in merged.hits] == sorted((h.relevance for _, h in merged.hits), reverse=True)
    assert merged.failed == ["gone"]


def test_read_sees_hidden_documents_and_the_generation(rt: Runtime) -> None:
    doc, generation = retrieve.read(rt, scope(), "guide/hidden.md")
    assert doc is not None and doc.qa_visible is False and generation == retrieve.generation(rt, scope())
    assert retrieve.read(rt, scope(), "no/such.md")[0] is None


def test_find_by_path_or_id_only_inside_the_scope(rt: Runtime) -> None:
    guide = scope(path_globs=("guide/**",))
    assert retrieve.find(rt, guide, path="guide/replay.md") is not None
    assert retrieve.find(rt, guide, doc_id="guide/replay.md") is not None
    assert retrieve.find(rt, guide, path="ops/deploy.md") is None  # outside the scope: no oracle
    assert retrieve.find(rt, guide, doc_id="guide/hidden.md") is None  # hidden
    assert retrieve.find(rt, guide, path="guide/nothing.md") is None


@pytest.mark.parametrize("call", ["search", "generation", "read", "find"])
@pytest.mark.anyio
async def test_an_absent_index_is_dependency_unavailable(rt: Runtime, call: str) -> None:
    gone = scope("absent")
    with pytest.raises(DependencyUnavailable) as err:
        if call == "search":
            await retrieve.search(rt, gone, "q", 3, summary_chars=50, content_chars=1)
        elif call == "generation":
            retrieve.generation(rt, gone)
        elif call == "read":
            retrieve.read(rt, gone, "x")
        else:
            retrieve.find(rt, gone, doc_id="x")
    assert err.value.code == "index_unavailable" and "/" not in err.value.message


@pytest.mark.parametrize("method", ["search", "stats", "get_document", "doc_id_at"])
@pytest.mark.anyio
async def test_a_failing_index_is_dependency_unavailable_and_logged(rt: Runtime, monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture, method: str) -> None:
    idx = rt.index("docs")

    def broken(*args: Any, **kw: Any) -> Any:
        raise OSError("disk gone")

    monkeypatch.setattr(idx, method, broken)
    if method == "stats":  # read only when the reader's label is unknown (meta.json unreadable at its reload)
        monkeypatch.setattr(type(idx), "generation", property(lambda self: None))
    with caplog.at_level(logging.WARNING, logger="kbgate.retrieve"), pytest.raises(DependencyUnavailable):
        if method == "search":
            await retrieve.search(rt, scope(), "密钥", 3, summary_chars=50, content_chars=1)
        elif method == "stats":
            retrieve.generation(rt, scope())
        elif method == "get_document":
            retrieve.read(rt, scope(), "guide/replay.md")
        else:
            retrieve.find(rt, scope(), path="guide/replay.md")
    assert any(r.name == "kbgate.retrieve" and getattr(r, "index", None) == "docs" for r in caplog.records)


@pytest.mark.anyio
async def test_a_search_that_may_wait_runs_in_a_worker_thread_and_a_lexical_one_inline(
        docs_index: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the answer cache off: the same search twice must reach the index twice
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=docs_index, search={"answer_cache_entries": 0}), tmp_path))
    idx = rt.index("docs")
    ran_in: list[int] = []
    search = idx.search

    def recorded(*args: Any, **kw: Any) -> Any:
        ran_in.append(threading.get_ident())
        return search(*args, **kw)

    monkeypatch.setattr(idx, "search", recorded)
    lexical = await retrieve.search(rt, scope(), "密钥轮换", 3, summary_chars=50, content_chars=1)
    monkeypatch.setattr(idx, "search_may_wait", True)  # what indexes.dense.HybridIndex declares
    waiting = await retrieve.search(rt, scope(), "密钥轮换", 3, summary_chars=50, content_chars=1)
    assert ran_in[0] == threading.get_ident() and ran_in[1] != threading.get_ident()
    assert waiting.hits == lexical.hits and lexical.hits


@pytest.mark.anyio
async def test_a_segment_damaged_in_place_is_index_unavailable_not_a_rust_panic(tmp_path: Path) -> None:
    from indexes.store import IndexStore
    from indexes.types import Document, Section

    root = tmp_path / "indexes"
    docs = [Document(f"d{i}.md", "损坏", (Section("", "损坏测试 正文内容 " * 40),), path=f"d{i}.md",
                     dataset="public") for i in range(20)]
    IndexStore(root).create_or_open_for_write("docs").ingest(docs, progress=False)
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=root, search={"answer_cache_entries": 0}), tmp_path))
    eff = scope()
    assert (await retrieve.search(rt, eff, "损坏测试", 3, summary_chars=50, content_chars=80)).hits
    for store_file in (root / "docs").glob("*.store"):  # overwritten in place, size kept: Tantivy panics
        # r+b, never truncated: a write_bytes() truncates first, and a page of the memory-mapped file
        # read past the new end in that window is a SIGBUS that kills the whole test run
        with store_file.open("r+b") as f:
            f.write(b"\xff" * store_file.stat().st_size)
    with pytest.raises(DependencyUnavailable) as caught:
        retrieve.read(rt, eff, "d1.md")
    assert caught.value.code == "index_unavailable"
    with pytest.raises(DependencyUnavailable):
        await retrieve.search(rt, eff, "损坏测试", 3, summary_chars=50, content_chars=80)


_DIRTY = ("标题" + "长" * 100_000, "危险\x1b[31m内容\x00结束\ufffe", "javascript:alert(1)", "摘\x07要")


@pytest.mark.anyio
async def test_hits_and_documents_of_an_index_built_before_the_ingest_checks_are_served_clean(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    import indexes.writer
    from indexes.safe_text import MAX_TITLE_CHARS
    from indexes.schema import CLEAN_AT_INGEST, CLEAN_RULES, SIDECAR
    from indexes.store import IndexStore
    from indexes.types import Document, Section

    # As an index of an older kbgate: a writer that did not clean what it was handed, and a
    # sidecar without the clean-at-ingest mark.
    with monkeypatch.context() as m:
        m.setattr(indexes.writer, "clean_document", lambda doc: (doc, []))
        IndexStore(tmp_path / "old").create_or_open_for_write("docs").ingest([
            Document("x", _DIRTY[0], (Section("", _DIRTY[1]),), url=_DIRTY[2], summary=_DIRTY[3]),
        ], progress=False)
    sidecar = tmp_path / "old" / "docs" / SIDECAR
    meta = json.loads(sidecar.read_text())
    assert meta.pop(CLEAN_AT_INGEST) == CLEAN_RULES
    sidecar.write_text(json.dumps(meta))
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=tmp_path / "old"), tmp_path))
    assert not rt.index("docs").clean_at_ingest
    [hit] = (await retrieve.search(rt, scope(), "危险内容", 3, summary_chars=50, content_chars=200)).hits
    assert hit.url is None and len(hit.title) == MAX_TITLE_CHARS
    assert "\x1b" not in hit.content and "\x00" not in hit.content and "\ufffe" not in hit.content
    assert "危险内容结束" in hit.content and "\x1b" not in hit.summary
    doc, _ = retrieve.read(rt, scope(), "x")
    assert doc is not None and doc.url is None and doc.summary == "摘要" and "危险内容结束" in doc.text
    found = retrieve.find(rt, scope(), doc_id="x")
    assert found is not None and len(found.title) == MAX_TITLE_CHARS


@pytest.mark.anyio
async def test_an_index_cleaned_at_ingest_serves_its_hits_as_stored(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from gateway.core import retrieve as retrieve_module
    from indexes.safe_text import MAX_TITLE_CHARS, clean_hit
    from indexes.store import IndexStore
    from indexes.types import Document, Section

    # A Document built in code, as dirty as above: the writer cleans it and says so.
    report = IndexStore(tmp_path / "new").create_or_open_for_write("docs").ingest([
        Document("x", _DIRTY[0], (Section("", _DIRTY[1]),), url=_DIRTY[2], summary=_DIRTY[3]),
        Document("y", "干净", (Section("", "危险内容之外的正文"),), url="https://example.com/y"),
    ], progress=False)
    assert any("control characters" in why for _, why in report.warnings)
    assert any("not kept" in why for _, why in report.warnings)
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=tmp_path / "new",
                              search={"answer_cache_entries": 0}), tmp_path))
    assert rt.index("docs").clean_at_ingest

    def refused(hit: object) -> object:
        raise AssertionError("clean_hit called on an index cleaned at ingest")

    monkeypatch.setattr(retrieve_module, "clean_hit", refused)
    hits = (await retrieve.search(rt, scope(), "危险内容", 3, summary_chars=50, content_chars=200)).hits
    assert [h.doc_id for h in hits] == ["x", "y"]
    for h in hits:
        assert clean_hit(h) is h  # nothing the serving pass would change
    x = hits[0]
    assert x.url is None and len(x.title) == MAX_TITLE_CHARS and "危险内容结束" in x.content
    assert "\x1b" not in x.content + x.summary and "\x00" not in x.content and "\ufffe" not in x.content
    assert hits[1].url == "https://example.com/y"


def test_find_by_path_picks_the_document_of_the_scope_when_two_datasets_share_the_path(tmp_path: Path) -> None:
    from indexes.ingest import read_paths
    from indexes.store import IndexStore

    ki = IndexStore(tmp_path / "two").create_or_open_for_write("docs")
    for name in ("ds1", "ds2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "same.md").write_text(f"# 同名\n\n{name} 的正文。\n", encoding="utf-8")
        ki.ingest(read_paths([tmp_path / name], dataset=name), progress=False)
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=tmp_path / "two"), tmp_path))
    for name in ("ds1", "ds2"):
        doc = retrieve.find(rt, scope(datasets=(name,)), path="same.md")
        assert doc is not None and doc.doc_id == f"{name}:same.md" and f"{name} 的正文" in doc.text


@pytest.mark.anyio
async def test_an_index_built_by_older_rules_serves_no_loose_url_nor_a_name_that_walks_a_tree(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index marked clean at ingest by the rules before strict URLs (`true`) served
    'https://u:p@a.example/"><b>' as the callback Url and Dify metadata.url; and its documents at
    'a/../config/x' (path or id) were served outside the config/** rule."""
    import json

    import indexes.writer
    from indexes.schema import CLEAN_AT_INGEST, SIDECAR
    from indexes.store import IndexStore
    from indexes.types import Document, Section

    loose = ("https://u:p@a.example/x", 'https://a.example/"><b>x', "https://a.example:99999/x")
    with monkeypatch.context() as m:  # as written before: no path check, URLs only http(s)
        m.setattr(indexes.writer, "document_problem", lambda doc_id, path: None)
        m.setattr(indexes.writer, "clean_document", lambda doc: (doc, []))
        IndexStore(tmp_path / "old").create_or_open_for_write("docs").ingest([
            *(Document(f"u{n}", "链接", (Section("", f"松散链接{n}号"),), url=u) for n, u in enumerate(loose)),
            Document("walker", "走出", (Section("", "越界的秘密正文"),), path="a/../config/x"),
            Document("a/../config/y", "走出", (Section("", "越界的秘密正文二"),)),
            Document("fine", "正常", (Section("", "越界的秘密正文之外的正常正文"),), path="guide/ok.md",
                     url="https://a.example/ok"),
        ], progress=False)
    sidecar = tmp_path / "old" / "docs" / SIDECAR
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), CLEAN_AT_INGEST: True}))
    rt = Runtime(parse(config(tmp_path, tenants=[], indexes=tmp_path / "old",
                              search={"answer_cache_entries": 0}), tmp_path))
    assert not rt.index("docs").clean_at_ingest
    hits = (await retrieve.search(rt, scope(), "松散链接", 10, summary_chars=50, content_chars=80)).hits
    assert sorted(h.doc_id for h in hits) == ["u0", "u1", "u2"] and all(h.url is None for h in hits)
    hits = (await retrieve.search(rt, scope(), "越界的秘密正文", 10, summary_chars=50, content_chars=80)).hits
    assert [h.doc_id for h in hits] == ["fine"] and hits[0].url == "https://a.example/ok"
    assert retrieve.find(rt, scope(), doc_id="walker") is None
    assert retrieve.find(rt, scope(), doc_id="a/../config/y") is None
    assert retrieve.find(rt, scope(), path="a/../config/x") is None
    narrow = scope(path_globs=("a/**",))  # the path as written matches, as walked it is config/x
    assert (await retrieve.search(rt, narrow, "越界的秘密正文", 10, summary_chars=50, content_chars=80)).hits == []
