"""Shared by the index tests: a store in tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexes.store import IndexStore


@pytest.fixture(name="store")
def _store(tmp_path: Path) -> IndexStore:
    return IndexStore(tmp_path / "indexes")
