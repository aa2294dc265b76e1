"""gateway/core/runtime.py: the per-query work bounds of [search] reach every search, and a
config swap (reload) changes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.core.runtime import Runtime
from indexes.types import DEFAULT_BOUNDS, SearchBounds
from tests.support.configs import config, parse

QUERY = "运维手册 密钥轮换 索引重建"  # the long manual (3,000 matching lines) ranks first


def _manual_content(rt: Runtime) -> str:
    [hit] = [h for h in rt.index("docs").search(QUERY, 5) if h.doc_id == "long/manual.md"]
    return hit.content


def test_search_bounds_come_from_the_config_and_follow_a_reload(docs_index: Path, tmp_path: Path) -> None:
    rt = Runtime(parse(config(tmp_path, indexes=docs_index), tmp_path))
    assert rt.index("docs").bounds == DEFAULT_BOUNDS
    # the best chunk and further matching chunks of the page, up to content_chars
    assert len(_manual_content(rt)) > 1000

    rt.config = parse(config(tmp_path, indexes=docs_index,
                             search={"max_chunks_per_document": 1, "max_chunks_per_query": 40}), tmp_path)
    assert rt.index("docs").bounds == SearchBounds(max_chunks_per_query=40, max_chunks_per_document=1)
    assert rt.index("kb").bounds == SearchBounds(40, 1)  # an index opened after the swap too
    one_chunk = _manual_content(rt)  # only the best chunk is loaded: no further chunk in the content
    assert 0 < len(one_chunk) <= 600 and "\n\n" not in one_chunk


@pytest.mark.anyio
async def test_close_releases_the_opened_indexes(docs_index: Path, tmp_path: Path) -> None:
    rt = Runtime(parse(config(tmp_path, indexes=docs_index), tmp_path))
    first = rt.index("docs")
    assert rt.index("docs") is first
    await rt.close()  # a worker stopping: a hybrid index's encoder threads end here (tests/indexes/dense)
    assert rt.index("docs") is not first
