"""What is embedded for a chunk: the page title, the section heading, then the chunk text.

Rationale: docs/design-notes.md, "indexes/dense/texts.py".
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
