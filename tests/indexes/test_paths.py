"""indexes/paths.py: which document paths and ids walk a tree, and a name as walked."""

from __future__ import annotations

import pytest

from indexes.paths import document_problem, id_problem, normal_name, path_problem


@pytest.mark.parametrize("path", ["a/../config/x", "..", "../x", "x/..", "./x", "a/./b", "a/.", "/config/x",
                                  "a\\b", "a\\..\\config", "a/．．/config/x", "a／..／config"])
def test_paths_that_walk_or_are_absolute_are_refused(path: str) -> None:
    assert path_problem(path) is not None


@pytest.mark.parametrize("path", ["", "guide/a.md", "a..b/c.md", ".hidden/x", "x/...", "v1.2/..x", "a//b",
                                  "docs.example.com/guide/", "指南/部署 说明.md"])
def test_paths_that_walk_nowhere_are_kept(path: str) -> None:
    assert path_problem(path) is None


def test_ids_refuse_dot_segments_only() -> None:
    for doc_id in ("../../x", "a/../b", "..\\x", "x/.", "．．/x"):
        assert id_problem(doc_id) is not None, doc_id
    for doc_id in ("https://a.example/x", "/faq/7", "ds1:guide/a.md#0", "a\\b", "v1..2", "..."):
        assert id_problem(doc_id) is None, doc_id
    assert str(document_problem("../x", "")).startswith("'id'")
    assert str(document_problem("x", "a/../b")).startswith("'path'")
    assert document_problem("x", "a/b") is None


def test_a_name_as_walked() -> None:
    assert normal_name("a/../config/x") == "config/x"
    assert normal_name("../../x") == "x"
    assert normal_name("a\\.\\b//c/") == "a/b/c"
    assert normal_name("a/．．/config") == "config"
    plain = "guide/a.md"
    assert normal_name(plain) == plain and normal_name("faq-7") == "faq-7"
