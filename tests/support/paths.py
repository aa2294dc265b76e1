"""Where things are: the checkout, its test fixtures, and the shared corpora beside it."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
CORPORA = ROOT.parent / "shared" / "corpora"


def corpora_or_skip() -> Path:
    """The shared corpora folder; tests needing it skip only when it is absent."""
    if not CORPORA.is_dir():
        pytest.skip("../shared/corpora is absent")
    return CORPORA
