"""The shape of a document's path and id: what a scope rule reads is what the name says.

Rationale: docs/design-notes.md, "indexes/paths.py".
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["document_problem", "id_problem", "normal_name", "path_problem"]

_DOT_SEGMENT = re.compile(r"(?:^|[/\\])\.{1,2}(?:[/\\]|$)")
_SUSPECT = re.compile(r"[./\\]|[^\x00-\x7f]")  # a name without these has nothing to check


def _read(name: str) -> tuple[str, ...]:
    """`name` as given, and as read (NFKC) when that differs."""
    if name.isascii():
        return (name,)
    read = unicodedata.normalize("NFKC", name)
    return (name,) if read == name else (name, read)


def path_problem(path: str) -> str | None:
    """Why `path` cannot be a document path (module doc), or None when it can. Never raises."""
    if not path or _SUSPECT.search(path) is None:
        return None
    for form in _read(path):
        if "\\" in form:
            return "holds a backslash: paths are '/'-separated"
        if form.startswith("/"):
            return "starts with '/': paths are relative to the tree's root"
        segments = form.split("/")
        if "." in segments or ".." in segments:
            return "has a '.' or '..' segment"
    return None


def id_problem(doc_id: str) -> str | None:
    """Why `doc_id` cannot be a document id (a '.' or '..' segment, module doc), or None."""
    if _SUSPECT.search(doc_id) is None:
        return None
    if any(_DOT_SEGMENT.search(form) for form in _read(doc_id)):
        return "has a '.' or '..' segment"
    return None


def document_problem(doc_id: str, path: str) -> str | None:
    """Why a document of this id and path is refused ("'id' …" or "'path' …", never quoting
    the name: the caller names the document), or None. Never raises."""
    if (problem := id_problem(doc_id)) is not None:
        return f"'id' {problem} (an id never walks a tree: no '.' nor '..' between '/' or '\\')"
    if (problem := path_problem(path)) is not None:
        return f"'path' {problem}"
    return None


def normal_name(name: str) -> str:
    """`name` with its walk resolved (module doc); `name` itself when there is none."""
    if _SUSPECT.search(name) is None:
        return name
    out: list[str] = []
    for segment in unicodedata.normalize("NFKC", name).replace("\\", "/").split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if out:
                out.pop()
            continue
        out.append(segment)
    return "/".join(out)
