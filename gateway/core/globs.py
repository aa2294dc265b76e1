"""Path globs as sets: matching, containment and intersection (pure; scope's set algebra).

Globs are those of scope filters ('*' within a segment, '**' across, `indexes.filters`), matched
here in Python exactly as the index filter matches them in Tantivy.
"""

from __future__ import annotations

import re
from functools import lru_cache

from indexes.filters import glob_to_regex

__all__ = ["glob_matches", "glob_within", "intersect_globs"]

_WILDCARD = re.compile(r"[*?]")


def glob_matches(glob: str, path: str) -> bool:
    """Does `path` match `glob` ('*' in a segment, '**' across, as the index filter does)?"""
    return _glob_regex(glob).fullmatch(path) is not None


@lru_cache(maxsize=1024)
def _glob_regex(glob: str) -> re.Pattern[str]:
    # Scopes repeat the same few globs on every hit: compile each once.
    return re.compile(glob_to_regex(glob))


def glob_within(inner: str, outer: str) -> bool:
    """True only when every path matching `inner` also matches `outer` (sound, not
    complete: an undecided pair answers False, which only ever narrows a scope).

    Decided cases: equal globs; `outer` = literal prefix + '**' and `inner` starts with
    that prefix; `outer` without wildcards and `inner` equal to it.
    """
    if inner == outer:
        return True
    if outer.endswith("**"):
        prefix = outer[:-2]
        if not _WILDCARD.search(prefix):
            return inner.startswith(prefix)
    return False


def intersect_globs(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
    """Globs matching only paths both sides match; None is "all". May come back empty."""
    if a is None:
        return b
    if b is None:
        return a
    out: list[str] = []
    for x in a:
        for y in b:
            if glob_within(x, y) and x not in out:
                out.append(x)
            elif glob_within(y, x) and y not in out:
                out.append(y)
    return tuple(out)
