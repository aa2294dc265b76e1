"""reStructuredText reader (docutils).

Rationale: docs/design-notes.md, "indexes/ingest/markup.py".
"""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..types import Document, IngestError, IngestWarning, Section

__all__ = ["read_rst"]

ReadItem = Document | IngestError | IngestWarning
_RST_SETTINGS = {
    "file_insertion_enabled": False,  # `include`, `csv-table :file:`: never read another file
    "raw_enabled": False,
    "report_level": 5,  # docutils' own messages: not printed
    "halt_level": 5,  # a malformed construct never stops the parse
    "warning_stream": False,
    "_disable_config": True,  # no docutils.conf of the machine changes what a file means
    "input_encoding": "utf-8",
}




def read_rst(data: bytes, rel_path: str, limit: int) -> Iterator[ReadItem]:
    """One Document for a .rst file (module docstring), or one IngestError (not UTF-8)."""
    try:
        source = data.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        yield IngestError(rel_path, f"not UTF-8: {exc.reason} at byte {exc.start}", kind="unreadable")
        return
    from docutils import nodes
    from docutils.core import publish_doctree

    try:
        tree = publish_doctree(source, source_path=rel_path, settings_overrides=_RST_SETTINGS)
    except Exception as exc:
        yield IngestError(rel_path, f"corrupt reStructuredText: {type(exc).__name__}: {str(exc)[:160]}",
                          kind="corrupt")
        return
    sections: list[Section] = []

    def body(node: Any) -> str:
        parts = []
        for child in node.children:
            if isinstance(child, nodes.section | nodes.title | nodes.system_message | nodes.comment | nodes.docinfo):
                continue
            text = child.astext().strip()
            if text:
                parts.append(text)
        return "\n".join(parts)

    def walk(node: Any, above: tuple[str, ...]) -> None:
        for child in node.children:
            if isinstance(child, nodes.section):
                title = " ".join(child[0].astext().split()) if child.children else ""
                sections.append(Section(title, body(child), " / ".join(above)))
                walk(child, (*above, title))

    sections.append(Section("", body(tree)))
    walk(tree, ())
    kept = tuple(s for s in sections if s.text or s.heading)
    doc_title = " ".join(str(tree.get("title") or "").split())
    first = next((s.heading for s in kept if s.heading), "")
    yield Document(id=rel_path, title=doc_title or first or Path(rel_path).stem, sections=kept, path=rel_path)
