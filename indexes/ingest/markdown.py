"""Markdown reader: YAML front matter, sections by heading, site markup stripped.

Rationale: docs/design-notes.md, "indexes/ingest/markdown.py".
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from ..types import Document, IngestError, IngestWarning, Section
from .fields import parse_cover_image, parse_publish_time, parse_qa_visible
from .metadata import keep_metadata

__all__ = ["RESERVED", "parse_markdown", "parse_markdown_kept", "read_markdown", "strip_inline"]

_HTML_TAGS = frozenset(
    """a abbr b blockquote br code dd del details div dl dt em font h1 h2 h3 h4 h5 h6 hr i
    iframe img ins kbd li mark ol p pre s small span strong sub summary sup table tbody td
    tfoot th thead tr u ul video source center section figure figcaption label""".split()
)
_COMMENT = re.compile(r"<!--.*?-->", re.S)
_FENCE = re.compile(r"^\s{0,3}(```+|~~~+)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_HEADING_ANCHOR = re.compile(r"\s*\{#[^{}\s]*\}\s*$")  # "## 限制 {#restrictions}"
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_SHORTCODE = re.compile(r"\{\{\{.*?\}\}\}|\{\{[<%].*?[%>]\}\}")
_TAG = re.compile(r"</?([A-Za-z][\w.-]*)(?:\s+(?:[^<>\"']|\"[^\"]*\"|'[^']*')*)?\s*/?>")
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^)]*\))*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+.*$")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC_STAR = re.compile(r"(?<![*A-Za-z0-9])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![*A-Za-z0-9])")
_ITALIC_UNDER = re.compile(r"(?<![\w])_(?=\S)(.+?)(?<=\S)_(?![\w])")
_STRIKE = re.compile(r"~~(.+?)~~")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_TABLE_SEP = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_BLOCK_PREFIX = re.compile(r"^\s*(?:>\s?)+")
_LIST_PREFIX = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?")
_SPACES = re.compile(r"[ \t]{2,}")
# Front-matter keys with a meaning of their own (not kept as metadata).
RESERVED = frozenset({"title", "url", "publish_time", "date", "cover_image", "summary", "qa_visible", "dataset"})


def _strip_tag(m: re.Match[str]) -> str:
    name = m.group(1)
    if name[0].isupper() or name.lower() in _HTML_TAGS:
        return "\n" if name.lower() in {"br", "p", "div", "li", "tr"} else ""
    return m.group(0)  # a placeholder like <cluster-name>: keep it as text


def _strip_prose(text: str) -> str:
    # The guards skip the regexes on the many lines without the trigger character.
    if "{{" in text:
        text = _SHORTCODE.sub("", text)
    if "<" in text:
        text = _TAG.sub(_strip_tag, text)
    if "*" in text or "_" in text:
        text = _BOLD.sub(r"\2", text)
        text = _ITALIC_STAR.sub(r"\1", text)
        text = _ITALIC_UNDER.sub(r"\1", text)
    if "~~" in text:
        text = _STRIKE.sub(r"\1", text)
    return text


def strip_inline(line: str) -> str:
    """One line of Markdown prose → plain text; code spans keep their text, minus backticks."""
    if "[" in line:
        # Links first: their text is often a code span ("[`X`](/x.md)").
        line = _IMAGE.sub(r"\1", line)
        line = _LINK.sub(r"\1", line)
        line = _REF_LINK.sub(r"\1", line)
    if "`" not in line:
        return _strip_prose(line)
    out: list[str] = []
    pos = 0
    for m in _CODE_SPAN.finditer(line):
        out.append(_strip_prose(line[pos : m.start()]))
        out.append(m.group(2).strip())
        pos = m.end()
    out.append(_strip_prose(line[pos:]))
    return "".join(out)


def _table_row(line: str) -> str:
    body = line.strip().strip("|")
    return " ".join(c.strip() for c in body.split("|") if c.strip())


def _split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text
    for i in range(1, len(lines)):
        if lines[i].strip() in ("---", "..."):
            try:
                meta = yaml.safe_load("\n".join(lines[1:i])) or {}
            except yaml.YAMLError as exc:
                raise ValueError(f"bad YAML front matter: {exc}".splitlines()[0]) from None
            if not isinstance(meta, dict):
                raise ValueError("front matter is not a YAML mapping")
            return meta, "\n".join(lines[i + 1 :])
    raise ValueError("front matter opened with '---' is never closed")


def _key_line(text: str, key: str) -> int | None:
    """The line number (1-based, in the file) of top-level `key:` in the front matter of `text`."""
    lines = text.lstrip("\ufeff").replace("\r\n", "\n").split("\n")
    for n, line in enumerate(lines[1:], start=2):
        if line.strip() in ("---", "..."):
            return None
        if re.match(rf"{re.escape(key)}\s*:", line):
            return n
    return None


def _enter(above: list[tuple[int, str]], level: int, heading: str) -> str:
    """Enter a heading of `level`: close the open headings at or below it in `above` (the
    stack of (level, text)), push it, and return the trail of its parents above level 1."""
    while above and above[-1][0] >= level:
        above.pop()
    trail = " / ".join(t for lvl, t in above if lvl > 1)
    above.append((level, heading))
    return trail


def _finish(lines: list[str]) -> str:
    text = "\n".join(_SPACES.sub(" ", ln).strip() for ln in lines)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def parse_markdown(text: str, rel_path: str) -> Document:
    """Markdown source → Document with id = path = rel_path (metadata: see `parse_markdown_kept`).
    Raises ValueError (front matter)."""
    return parse_markdown_kept(text, rel_path)[0]


def parse_markdown_kept(text: str, rel_path: str) -> tuple[Document, list[IngestWarning]]:
    """Markdown source → (Document with id = path = rel_path and its kept metadata, one
    IngestWarning per front-matter field not kept). Raises ValueError (front matter)."""
    meta, body = _split_front_matter(text.lstrip("\ufeff").replace("\r\n", "\n"))
    body = _COMMENT.sub("", body)
    sections: list[Section] = []
    heading = trail = ""
    above: list[tuple[int, str]] = []  # (level, heading) of the headings enclosing this one
    buf: list[str] = []
    first_heading = ""
    fence: str | None = None
    for raw in body.split("\n"):
        if fence is not None:
            if raw.strip().startswith(fence):
                fence = None
            else:
                buf.append(raw.rstrip())
            continue
        m = _FENCE.match(raw)
        if m:
            fence = m.group(1)
            continue
        h = _HEADING.match(raw) if "#" in raw else None
        if h:
            sections.append(Section(heading, _finish(buf), trail))
            heading = strip_inline(_HEADING_ANCHOR.sub("", h.group(2))).strip()
            trail = _enter(above, len(h.group(1)), heading)
            first_heading = first_heading or heading
            buf = []
            continue
        if ("[" in raw and _LINK_DEF.match(raw)) or ("--" in raw and _TABLE_SEP.match(raw)):
            continue
        if raw[:1] in "=-" and _SETEXT.match(raw) and buf and buf[-1].strip():
            # "Title\n=====": the previous line was a heading.
            sections.append(Section(heading, _finish(buf[:-1]), trail))
            heading = buf[-1].strip()
            trail = _enter(above, 1 if raw.lstrip()[:1] == "=" else 2, heading)
            first_heading = first_heading or heading
            buf = []
            continue
        line = _BLOCK_PREFIX.sub("", raw) if ">" in raw else raw
        line = _LIST_PREFIX.sub(r"\1", line)
        if line.lstrip().startswith("|"):
            line = _table_row(line)
        buf.append(strip_inline(line))
    sections.append(Section(heading, _finish(buf), trail))
    kept = tuple(s for s in sections if s.text or s.heading)
    title = meta.get("title")
    title = str(title).strip() if title else first_heading or Path(rel_path).stem
    # A field of the wrong type that only shapes what a caller sees (url, summary, cover_image)
    # is not kept and reported, the page indexed; one that decides who may see the
    # page (dataset, qa_visible) or when it was published refuses the page, as before: guessing
    # there could show a page to callers it was not meant for.
    if meta.get("dataset") is not None and not isinstance(meta["dataset"], str):
        raise ValueError("front matter 'dataset' must be a string")
    dropped: list[IngestWarning] = []
    for key in ("url", "summary"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            dropped.append(IngestWarning(rel_path, f"front matter '{key}' must be a string: not kept",
                                         _key_line(text, key)))
            meta[key] = None
    try:
        cover = parse_cover_image(meta.get("cover_image"))
    except ValueError as exc:
        dropped.append(IngestWarning(rel_path, f"front matter {exc}: not kept", _key_line(text, "cover_image")))
        cover = None
    time_key = "publish_time" if meta.get("publish_time") not in (None, "") else "date"
    try:
        seconds, converted = parse_publish_time(meta.get(time_key), time_key)
    except ValueError as exc:
        at = _key_line(text, time_key)
        raise ValueError(f"{exc} (front matter line {at})" if at else str(exc)) from None
    kept_meta, warnings = keep_metadata(meta, RESERVED, rel_path)
    warnings[:0] = dropped
    if converted is not None:
        warnings.insert(0, IngestWarning(rel_path, converted, _key_line(text, time_key)))
    return Document(
        id=rel_path,
        title=strip_inline(title),
        sections=kept,
        url=meta.get("url") or None,
        summary=strip_inline(str(meta.get("summary") or "")).strip() or None,
        publish_time=seconds,
        cover_image=cover,
        path=rel_path,
        dataset=meta.get("dataset") or "",
        qa_visible=parse_qa_visible(meta.get("qa_visible", True)),
        metadata=kept_meta,
    ), warnings


def read_markdown(path: Path, rel_path: str) -> Iterator[Document | IngestError | IngestWarning]:
    """One Document for a Markdown file and a warning per front-matter field not kept, or one
    IngestError (bad UTF-8, bad front matter)."""
    try:
        text = path.read_text(encoding="utf-8")
        doc, warnings = parse_markdown_kept(text, rel_path)
        yield doc
        yield from warnings
    except UnicodeDecodeError as exc:
        yield IngestError(rel_path, f"not UTF-8: {exc.reason} at byte {exc.start}")
    except ValueError as exc:
        yield IngestError(rel_path, str(exc))
    except OSError as exc:
        yield IngestError(rel_path, f"cannot read: {exc.strerror or exc}")
