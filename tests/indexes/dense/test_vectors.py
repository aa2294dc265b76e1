"""indexes/dense/vectors.py: vector sets per generation (publish, load, search, patch, prune,
an atomic CURRENT, incomplete generations never loaded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from indexes.dense.vectors import Entry, current_generation, load, load_current, publish
from indexes.schema import doc_key


def _entries(rng: np.random.Generator, docs: range, per_doc: int = 3, dim: int = 16) -> list[Entry]:
    out = []
    for d in docs:
        for n in range(per_doc):
            v = rng.normal(size=dim).astype(np.float32)
            out.append(Entry(f"d{d}#{n}", f"d{d}", v / np.linalg.norm(v)))
    return out


def test_publish_load_search_patch_and_prune(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    first = _entries(rng, range(40))
    docs = {f"d{d}": "r1" for d in range(40)}
    publish(tmp_path, 5, "fp", 16, docs, [], None, first)
    assert current_generation(tmp_path) is not None and current_generation(tmp_path)[0] == 5  # type: ignore[index]
    vs = load_current(tmp_path)
    assert vs is not None and len(vs) == 120 and vs.generation == 5
    top = vs.search(first[7].vector, 3)
    assert top[0][:2] == ("d2#1", "d2") and top[0][2] == pytest.approx(1.0, abs=1e-5)

    # Generation 6: d0 changed (3 new vectors), d39 deleted; the rest kept → the graph is patched.
    prev = load_current(tmp_path, view=False)
    assert prev is not None
    changed = _entries(rng, range(1))
    keep = [k for k, (_, d) in prev.chunk_of.items() if d not in ("d0", "d39")]
    docs6 = {**{f"d{d}": "r1" for d in range(1, 39)}, "d0": "r2"}
    folder6 = publish(tmp_path, 6, "fp", 16, docs6, keep, prev, changed)
    vs6 = load_current(tmp_path)
    assert vs6 is not None and vs6.generation == 6 and len(vs6) == 117
    assert vs6.search(changed[1].vector, 1)[0][0] == "d0#1"
    assert all(d != "d39" for _, d in vs6.chunk_of.values())
    assert vs6.revision_of["d0"] == "r2"
    # The previous generation stays (a reader may still map it); older ones are pruned.
    publish(tmp_path, 7, "fp", 16, docs6, list(vs6.chunk_of), load_current(tmp_path, view=False), [])
    names = sorted(p.name for p in (tmp_path / "dense").iterdir() if p.name.startswith("g-"))
    assert len(names) == 2 and folder6.name in names
    assert load_current(tmp_path).generation == 7  # type: ignore[union-attr]


def test_an_incomplete_generation_is_never_loaded(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    folder = publish(tmp_path, 1, "fp", 16, {"d0": "r"}, [], None, _entries(rng, range(1)))
    (folder / "manifest.json").write_text("{not json")
    assert load(folder) is None and load_current(tmp_path) is None


def test_empty_index_publishes_an_empty_set(tmp_path: Path) -> None:
    publish(tmp_path, 3, "fp", 0, {}, [], None, [])
    vs = load_current(tmp_path)
    assert vs is not None and len(vs) == 0 and vs.search(np.ones(4, dtype=np.float32), 5) == []


def test_keys_at_names_the_vector_of_a_chunk_by_its_fast_fields(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    entries = _entries(rng, range(3))
    publish(tmp_path, 1, "fp", 16, {f"d{d}": "r1" for d in range(3)}, [], None, entries)
    vs = load_current(tmp_path)
    assert vs is not None
    keys = vs.keys_at([(doc_key("d1"), 2), (doc_key("d0"), 0), (doc_key("d9"), 0), (doc_key("d1"), 7)])
    assert [vs.chunk_of[k][0] if k is not None else None for k in keys] == ["d1#2", "d0#0", None, None]
    found = [k for k in keys if k is not None]
    assert vs.vectors(found) @ entries[5].vector == pytest.approx([1.0, float(entries[0].vector @ entries[5].vector)],
                                                                  abs=1e-5)
