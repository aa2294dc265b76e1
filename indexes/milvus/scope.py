"""A scope (`SearchFilter`) as a Milvus filter expression, and the part of it checked after.

Rationale: docs/design-notes.md, "indexes/milvus/scope.py".
"""

from __future__ import annotations

import functools
import re

from ..filters import exclusion_regex, glob_to_regex
from ..types import SearchFilter

__all__ = ["allowed", "expression", "like", "quote"]


def quote(text: str) -> str:
    """A Milvus expression string literal of `text`."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def like(glob: str) -> str:
    """The `like` pattern that holds every path `glob` matches (and maybe more)."""
    out = glob.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return re.sub(r"\*+", "%", out).replace("?", "_")


def expression(flt: SearchFilter | None, *more: str) -> str:
    """The filter expression of `flt` (None: visible documents), joined with `more` clauses."""
    parts: list[str] = [m for m in more if m]
    if flt is None or not flt.include_hidden:
        parts.append("qa_visible == true")
    if flt is not None and flt.datasets is not None:
        parts.append(f"dataset in [{', '.join(map(quote, flt.datasets))}]" if flt.datasets else "chunk < 0")
    if flt is not None and flt.path_globs is not None:
        parts.append("(" + " or ".join(f"path like {quote(like(g))}" for g in flt.path_globs) + ")"
                     if flt.path_globs else "chunk < 0")
    return " and ".join(parts)


@functools.lru_cache(maxsize=512)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def allowed(flt: SearchFilter | None, path: str, doc_id: str) -> bool:
    """Whether a document at `path` with id `doc_id` lies in `flt`'s path globs and outside its
    excluded trees (datasets and visibility were in the expression)."""
    if flt is None:
        return True
    if flt.path_globs is not None and not any(_compiled(glob_to_regex(g)).fullmatch(path) for g in flt.path_globs):
        return False
    return not any(_compiled(exclusion_regex(g)).fullmatch(name)
                   for g in flt.exclude_path_globs for name in (path, doc_id))
