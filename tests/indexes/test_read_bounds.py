"""Readers within bounds (indexes/ingest/bounds.py, indexes/ingest/confine.py): a file nested too
deep or made of too much markup is refused before any library parses it; what passes is parsed
in a reused child process whose memory and CPU are limited, so a file past a limit costs the
calling process nothing and the refusal names the limit's config key. Work is counted (parses,
child processes started), never timed."""

from __future__ import annotations

import os
import resource
from pathlib import Path
from typing import Any

import docx
import pytest

from gateway.core.config import load_read_bounds, parse_config
from gateway.core.errors import ConfigError
from indexes.ingest import ReadBounds, confine, read_data, read_paths
from indexes.ingest.bounds import rst_nesting
from indexes.ingest.formats import read_bytes
from indexes.types import Document, IngestError
from tests.support.files import deep_rst, empty_runs_docx

MB = 10 * 1024 * 1024
MIB = 1024 * 1024
# What lets each attack reach the child: pre-checks that let everything through.
OPEN = {"max_nesting": 10_000, "max_markup_elements": 10**9}


def _rss() -> int:
    """This process's resident memory now, bytes."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _only_error(items: list[Any]) -> IngestError:
    [err] = items
    assert isinstance(err, IngestError), err
    return err


def test_a_deep_nested_rst_is_refused_before_docutils_parses_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import docutils.core

    parsed: list[int] = []
    monkeypatch.setattr(docutils.core, "publish_doctree", lambda *a, **k: parsed.append(1))
    err = _only_error(list(read_bytes(deep_rst(3000), "deep.rst", max_document_bytes=MB)))
    assert err.kind == "too_large" and "indexes.max_nesting" in err.reason and "50 levels" in err.reason, err
    assert not parsed


def test_rst_nesting_counts_indentation_and_list_markers() -> None:
    assert rst_nesting("a\n\n  b\n\n    c\n\n  d\n", 100) == 2
    assert rst_nesting("- - - - x\n", 100) == 4  # lists opened on one line nest without indentation
    assert rst_nesting("1. (a) i) x\n", 100) == 3
    assert rst_nesting(deep_rst(3000).decode(), 60) == 61  # stops once past the bound


def test_an_ordinary_nested_rst_is_read() -> None:
    text = "Title\n=====\n\n- one\n\n  - two\n\n    > not a quote\n\n      deeper\n"
    [doc] = [i for i in read_bytes(text.encode(), "ok.rst", max_document_bytes=MB) if isinstance(i, Document)]
    assert "deeper" in doc.sections[0].text or any("deeper" in s.text for s in doc.sections)


def test_a_docx_of_empty_runs_is_refused_by_its_markup_before_python_docx_parses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = empty_runs_docx(2_000_000)  # no text at all: the text limit alone lets it through
    assert len(data) < 100_000
    parsed: list[int] = []
    monkeypatch.setattr(docx, "Document", lambda *a, **k: parsed.append(1))
    err = _only_error(list(read_bytes(data, "runs.docx", max_document_bytes=MB)))
    assert err.kind == "too_large" and "indexes.max_markup_elements" in err.reason and "500000" in err.reason, err
    assert not parsed


def test_markup_nested_too_deep_is_refused() -> None:
    d = docx.Document()
    d.add_paragraph("x")
    import io
    out = io.BytesIO()
    d.save(out)
    err = _only_error(list(read_bytes(out.getvalue(), "ok.docx", max_document_bytes=MB,
                                      bounds=ReadBounds(max_nesting=3))))
    assert "indexes.max_nesting" in err.reason and "markup nests over 3 levels" in err.reason, err


def test_a_parse_past_its_memory_is_refused_in_the_child_and_the_caller_keeps_its_memory() -> None:
    data = deep_rst(3000)  # docutils took 1.3 GiB on this before a RecursionError
    before = _rss()
    err = _only_error(list(read_data(data, "deep.rst", bounds=ReadBounds(**OPEN, memory_bytes=256 * MIB))))
    assert err.kind == "too_large" and "indexes.reader_memory_bytes" in err.reason and "268435456" in err.reason
    assert _rss() - before < 64 * MIB
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before < 256 * MIB  # never held here


def test_a_parse_past_its_cpu_is_refused_naming_the_limit() -> None:
    data = empty_runs_docx(2_000_000)  # python-docx: about 20 s of CPU
    err = _only_error(list(read_data(data, "runs.docx", bounds=ReadBounds(**OPEN, cpu_seconds=1))))
    assert err.kind == "too_large" and "indexes.reader_cpu_seconds" in err.reason and "1 s of CPU" in err.reason


def test_the_child_is_reused_for_ordinary_files_and_replaced_after_a_refusal() -> None:
    page = b"# Guide\n\nRotate the key every ninety days.\n"
    list(read_data(page, "a.md"))
    pool = confine._pool
    assert pool is not None
    child = pool.idle.get_nowait()
    pool.idle.put(child)
    for i in range(20):
        [doc] = [d for d in read_data(page, f"p{i}.md") if isinstance(d, Document)]
        assert doc.id == f"p{i}.md"
    assert pool.idle.get_nowait() is child  # one process read all twenty
    pool.idle.put(child)
    list(read_data(deep_rst(3000), "deep.rst", bounds=ReadBounds(**OPEN, memory_bytes=256 * MIB)))
    assert child.proc.poll() is not None  # the child that ran out is gone
    [doc] = [d for d in read_data(page, "after.md") if isinstance(d, Document)]
    assert doc.id == "after.md"


def test_index_add_reads_through_the_child_within_the_bounds(tmp_path: Path) -> None:
    (tmp_path / "deep.rst").write_bytes(deep_rst(3000))
    (tmp_path / "ok.md").write_text("# OK\n\nfine\n")
    items = list(read_paths([tmp_path], bounds=ReadBounds(**OPEN, memory_bytes=256 * MIB)))
    errors = [i for i in items if isinstance(i, IngestError)]
    assert [e.file for e in errors] == ["deep.rst"] and "indexes.reader_memory_bytes" in errors[0].reason
    assert [d.id for d in items if isinstance(d, Document)] == ["ok.md"]


@pytest.mark.parametrize(("key", "value"), [("max_nesting", 1), ("max_markup_elements", 10),
                                            ("reader_memory_bytes", 1024), ("reader_cpu_seconds", 0),
                                            ("reader_cpu_seconds", "ten")])
def test_a_bound_out_of_range_is_refused_naming_its_key(key: str, value: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"indexes": {key: value}}, base_dir=tmp_path, read_secrets=False)
    assert f"indexes.{key}" in str(info.value)


def test_the_bounds_are_read_from_the_config(tmp_path: Path) -> None:
    data = {"indexes": {"max_nesting": 20, "max_markup_elements": 5000, "reader_memory_bytes": 128 * MIB,
                        "reader_cpu_seconds": 7}}
    cfg = parse_config(data, base_dir=tmp_path, read_secrets=False)
    want = ReadBounds(max_nesting=20, max_markup_elements=5000, memory_bytes=128 * MIB, cpu_seconds=7)
    assert cfg.documents.read_bounds == want
    path = tmp_path / "gateway.toml"
    path.write_text("[indexes]\nmax_nesting = 20\nmax_markup_elements = 5000\n"
                    f"reader_memory_bytes = {128 * MIB}\nreader_cpu_seconds = 7\n")
    assert load_read_bounds(path) == want
