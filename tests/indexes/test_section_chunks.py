"""Chunks that follow the document (indexes/ingest/chunking.py `alone_chars`): in every format whose
reader finds headings (Markdown, HTML, DOCX, reStructuredText, PDF outlines), a section long
enough to stand alone is a chunk of its own under its heading, and short sections join their short
neighbours; by default (alone_chars 0, the measured choice) every short-enough section merges up to
max_chars."""

from __future__ import annotations

import io
from collections.abc import Callable

import docx
import pytest

from indexes.ingest.chunking import chunk
from indexes.ingest.formats import read_bytes
from indexes.types import Document
from tests.support.files import cjk_pdf

SECTIONS = [("适用范围", "本制度适用于公司全体正式员工，实习生另行约定。" * 5),
            ("年假天数", "累计工作满一年不满十年的，年假五天；满十年的，十天。" * 5),
            ("备注", "见附件。"),  # short: joins its neighbour
            ("未休年假的处理", "当年未休的年假可以顺延到次年第一季度使用，逾期不再保留。" * 5)]
ALONE = 100


def markdown() -> tuple[bytes, str]:
    text = "# 年休假制度\n\n" + "".join(f"## {h}\n\n{t}\n\n" for h, t in SECTIONS)
    return text.encode(), "leave.md"


def html() -> tuple[bytes, str]:
    body = "".join(f"<h2>{h}</h2><p>{t}</p>" for h, t in SECTIONS)
    return f"<html><head><title>年休假制度</title></head><body><h1>年休假制度</h1>{body}</body></html>".encode(), \
        "leave.html"


def word() -> tuple[bytes, str]:
    d = docx.Document()
    d.add_heading("年休假制度", 0)
    for h, t in SECTIONS:
        d.add_heading(h, 1)
        d.add_paragraph(t)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue(), "leave.docx"


def rst() -> tuple[bytes, str]:
    def title(text: str, mark: str) -> str:
        return f"{text}\n{mark * (2 * len(text) + 2)}\n\n"
    text = "=" * 12 + "\n" + title("年休假制度", "=") + "".join(f"{title(h, '-')}{t}\n\n" for h, t in SECTIONS)
    return text.encode(), "leave.rst"


def pdf() -> tuple[bytes, str]:
    return cjk_pdf([[(0, 20, "年休假制度"), *[item for h, t in SECTIONS for item in ((1, 16, h), (-1, 11, t))]]]), \
        "leave.pdf"


@pytest.mark.parametrize("make", [markdown, html, word, rst, pdf], ids=["md", "html", "docx", "rst", "pdf"])
def test_a_section_long_enough_to_stand_alone_is_a_chunk_under_its_heading(make: Callable[[], tuple[bytes, str]]
                                                                          ) -> None:
    data, name = make()
    [doc] = [d for d in read_bytes(data, name, max_document_bytes=1 << 20) if isinstance(d, Document)]
    alone = chunk(doc, alone_chars=ALONE)
    headings = [c.heading for c in alone]
    assert headings[-3:] == ["适用范围", "年假天数", "未休年假的处理"] or \
        headings[-4:] == ["适用范围", "年假天数", "备注", "未休年假的处理"], headings
    by_heading = {c.heading: c.text for c in alone}
    assert "顺延到次年第一季度" in by_heading["未休年假的处理"] and "五天" not in by_heading["未休年假的处理"]
    assert "五天" in by_heading["年假天数"] and "适用于" not in by_heading["年假天数"]
    assert "见附件" in "".join(c.text for c in alone)  # the short section is kept
    merged = chunk(doc)  # the default: short-enough sections share chunks up to max_chars
    assert len(merged) < len(alone) or len(alone) <= 3
