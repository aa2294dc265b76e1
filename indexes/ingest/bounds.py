"""The bounds a document reader runs within, and the checks that refuse a file before parsing.

Rationale: docs/design-notes.md, "indexes/ingest/bounds.py".
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from xml.parsers import expat

from ..types import IngestError

__all__ = ["DEFAULT_READ_BOUNDS", "ReadBounds", "markup_problem", "nesting_problem", "rst_nesting"]

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ReadBounds:
    """The limits of one file's reading (module docstring). Raises ValueError naming the
    field when one is out of range (the config names its key before this)."""

    max_nesting: int = 50
    max_markup_elements: int = 500_000
    memory_bytes: int = 1024 * MIB
    cpu_seconds: int = 60

    def __post_init__(self) -> None:
        for name, lo in (("max_nesting", 2), ("max_markup_elements", 1000), ("memory_bytes", 64 * MIB),
                         ("cpu_seconds", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < lo:
                raise ValueError(f"{name} must be an integer >= {lo}")


DEFAULT_READ_BOUNDS = ReadBounds()

# A line's leading list markers: '- ', '* ', '+ ', '• ', '1. ', '(a) ', 'iv) ', '#. ' (each opens a list).
_MARKER = re.compile(r"(?:[-*+\u2022\u2023\u2043]|\(?(?:[0-9]{1,9}|[a-zA-Z]|[ivxlcdmIVXLCDM]{1,8}|#)[.)])[ \t]+")


def rst_nesting(text: str, stop: int) -> int:
    """The deepest nesting of reStructuredText `text`: per line, the number of indentations
    open (a stack, as Python's tokenizer keeps one; tabs count 8) plus the list markers that
    open it. Stops counting once past `stop` (one pass, O(len(text)))."""
    stack = [0]
    deepest = 0
    for line in text.splitlines():
        body = line.lstrip(" \t")
        if not body:
            continue
        indent = len(line[:len(line) - len(body)].expandtabs(8))
        while stack and indent < stack[-1]:
            stack.pop()
        if indent > stack[-1]:
            stack.append(indent)
        markers = 0
        pos = 0
        while (m := _MARKER.match(body, pos)) is not None:
            markers += 1
            pos = m.end()
            if markers > stop:
                break
        deepest = max(deepest, len(stack) - 1 + markers)
        if deepest > stop:
            break
    return deepest


def nesting_problem(text: str, rel_path: str, bounds: ReadBounds) -> IngestError | None:
    """A too_large IngestError when reStructuredText `text` nests deeper than
    bounds.max_nesting (`rst_nesting`), else None."""
    depth = rst_nesting(text, bounds.max_nesting)
    if depth <= bounds.max_nesting:
        return None
    return IngestError(rel_path, f"it nests over {bounds.max_nesting} levels deep (indentation and lists; "
                                 "indexes.max_nesting): refused unparsed", kind="too_large")


class _Over(Exception):
    """Raised from inside the XML scan once a limit is passed."""


def markup_problem(data: bytes, rel_path: str, kind: str, bounds: ReadBounds) -> IngestError | None:
    """A too_large IngestError when the XML parts (*.xml, *.rels) of the ZIP package `data`
    hold more than bounds.max_markup_elements elements together, or nest deeper than
    bounds.max_nesting; else None (also for a package too broken to scan: its library then
    refuses it as corrupt). Streams each part through expat, keeping no tree, and stops at
    the first limit passed."""
    count = depth = 0
    deepest = 0

    def start(_name: str, _attrs: object) -> None:
        nonlocal count, depth, deepest
        count += 1
        depth += 1
        deepest = max(deepest, depth)
        if count > bounds.max_markup_elements or depth > bounds.max_nesting:
            raise _Over

    def end(_name: str) -> None:
        nonlocal depth
        depth -= 1

    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            for info in package.infolist():
                if not info.filename.lower().endswith((".xml", ".rels")):
                    continue
                parser = expat.ParserCreate()
                parser.StartElementHandler = start
                parser.EndElementHandler = end
                depth = 0
                with package.open(info) as part:
                    while chunk := part.read(256 * 1024):
                        parser.Parse(chunk, False)
                    parser.Parse(b"", True)
    except _Over:
        pass
    except Exception:
        return None
    if count > bounds.max_markup_elements:
        return IngestError(rel_path, f"its markup holds over {bounds.max_markup_elements} XML elements "
                                     f"(indexes.max_markup_elements): refused unparsed ({kind} file)",
                           kind="too_large")
    if deepest > bounds.max_nesting:
        return IngestError(rel_path, f"its markup nests over {bounds.max_nesting} levels deep "
                                     f"(indexes.max_nesting): refused unparsed ({kind} file)", kind="too_large")
    return None
