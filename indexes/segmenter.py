"""The word segmenter (rjieba), loaded on first use rather than at import.

Loading its dictionary is about 0.1 s of a process's start; a process that reads a config and
analyses no text (most `kbgate` commands) never pays it. Rationale: docs/design-notes.md,
"indexes/segmenter.py".
"""

from __future__ import annotations

from functools import cache
from types import ModuleType

__all__ = ["jieba", "warm"]


@cache
def jieba() -> ModuleType:
    """The `rjieba` module, imported (its dictionary loaded) on the first call."""
    import rjieba

    return rjieba


def warm() -> None:
    """Load the segmenter now rather than on the first question analysed."""
    jieba()
