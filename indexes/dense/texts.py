"""What is embedded for a chunk: the page title, the section heading, then the chunk text.

Prefixing the title and heading gives a chunk the context its text often lacks ("取值范围"
alone says nothing of which variable); measured on held-back documentation sets it lifted
ranking by 0.02–0.05 MRR (../shared/notes/dense-retrieval.md). The same function serves
ingest (from `Chunk`s) and reconciliation (from stored chunk fields), so a chunk's text and
hence its cache key are the same either way.
"""

from __future__ import annotations

__all__ = ["passage_text"]


def passage_text(title: str, heading: str, text: str) -> str:
    """'title\\nheading\\ntext' without empty parts or a repeated title (a heading equal to
    the title, as a Markdown page's H1 often is, appears once)."""
    parts = [p for p in (title.strip(), heading.strip()) if p]
    if len(parts) == 2 and parts[0] == parts[1]:
        parts.pop()
    parts.append(text)
    return "\n".join(parts)
