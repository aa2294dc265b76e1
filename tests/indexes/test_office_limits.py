"""Office files that expand when unzipped (a tester's finding): the size limit is kept while a
DOCX, PPTX, XLSX or PDF is read, never only after the whole conversion; a DOCX's paragraph
styles are looked up once, not per paragraph; an XLSX's rows past an understated <dimension>
tag are read. Work done is counted (paragraphs read, slides and pages converted), not timed."""

from __future__ import annotations

import io
import re
import zipfile
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from fpdf import FPDF
from pypdf import PageObject

from indexes.ingest import office
from indexes.ingest.formats import read_bytes
from indexes.types import Document, IngestError

MB = 10 * 1024 * 1024


def _repacked(data: bytes, name: str, change: Any) -> bytes:
    """The ZIP package `data` with its part `name` replaced by change(old text) (str or an
    iterable of str chunks, written as they come: the part is never whole in memory)."""
    src = zipfile.ZipFile(io.BytesIO(data))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        for info in src.infolist():
            if info.filename != name:
                dst.writestr(info.filename, src.read(info))
                continue
            new = change(src.read(info).decode("utf-8"))
            with dst.open(name, "w", force_zip64=True) as part:
                for chunk in [new] if isinstance(new, str) else new:
                    part.write(chunk.encode("utf-8"))
    return out.getvalue()


def _bomb_docx(paragraphs: int, chars: int = 1000) -> bytes:
    """A DOCX (python-docx's template, so with its styles part) of `paragraphs` paragraphs of
    `chars` characters each: small on disk, `paragraphs` x `chars` bytes of text unzipped."""
    d = docx.Document()
    d.add_paragraph("x")
    out = io.BytesIO()
    d.save(out)

    def body(xml: str) -> Any:
        head, rest = xml.split("<w:body>", 1)
        yield head + "<w:body>"
        para = "<w:p><w:r><w:t>" + "页" * (chars // 3) + "a" * (chars % 3) + "</w:t></w:r></w:p>"
        for _ in range(paragraphs // 1000):
            yield para * 1000
        yield para * (paragraphs % 1000)
        yield rest[rest.index("<w:sectPr"):]

    return _repacked(out.getvalue(), "word/document.xml", body)


def test_a_docx_bomb_is_refused_once_its_text_passes_the_limit_before_python_docx_parses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = _bomb_docx(30_000)  # the tester's second file: 30,000 x 1,000 bytes, 30 MB of text
    assert len(data) < 200_000
    parsed: list[int] = []

    def whole_parse(*args: Any, **kwargs: Any) -> None:
        parsed.append(1)
        raise RuntimeError("python-docx asked to parse the whole bomb")

    monkeypatch.setattr(docx, "Document", whole_parse)
    [err] = list(read_bytes(data, "bomb.docx", max_document_bytes=MB))
    assert isinstance(err, IngestError) and err.kind == "too_large", err
    assert "converted from docx" in err.reason and not parsed
    size, paragraphs = office.docx_text_scan(data, MB)
    assert MB < size < MB + 2000 and paragraphs == MB // 1001  # stopped inside the paragraph past the limit


def test_a_docx_that_unzips_to_over_the_factor_times_the_limit_is_refused_unread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    data = _bomb_docx(2_000)  # 2 MB unzipped
    scans: list[int] = []
    monkeypatch.setattr(office, "docx_text_scan", lambda *a: scans.append(1) or (0, 0))
    [err] = list(read_bytes(data, "bomb.docx", max_document_bytes=100_000))
    assert isinstance(err, IngestError) and err.kind == "too_large" and "unzip to" in err.reason and not scans
    [doc] = list(read_bytes(data, "ok.docx", max_document_bytes=MB))  # under the limit: read
    assert isinstance(doc, Document) and len(doc.text.encode()) > 1_900_000


def test_docx_styles_are_looked_up_once_not_per_paragraph(monkeypatch: pytest.MonkeyPatch) -> None:
    d = docx.Document()
    d.add_heading("手册", 0)
    for n in range(50):
        d.add_heading(f"第{n}章", 1)
        d.add_heading(f"第{n}节", 2)
        d.add_paragraph(f"正文 {n}")
    out = io.BytesIO()
    d.save(out)

    def per_paragraph(self: Any) -> Any:
        raise AssertionError("Paragraph.style read per paragraph (about 1 ms each)")

    monkeypatch.setattr(docx.text.paragraph.Paragraph, "style", property(per_paragraph))
    [doc] = list(read_bytes(out.getvalue(), "manual.docx", max_document_bytes=MB))
    assert isinstance(doc, Document), doc
    assert doc.title == "手册"
    assert [(s.heading, s.trail, s.text) for s in doc.sections[:4]] == [
        ("第0章", "", ""), ("第0节", "第0章", "正文 0"), ("第1章", "", ""), ("第1节", "第1章", "正文 1")]
    assert len(doc.sections) == 100


def test_a_pptx_stops_at_the_slide_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    deck = pptx.Presentation()
    for n in range(40):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"第{n}页"
        slide.placeholders[1].text = "x" * 4000
    out = io.BytesIO()
    deck.save(out)
    limit = len(out.getvalue()) + 100  # the file passes the size check; its text (160 kB) does not
    assert limit < 100_000
    read: list[int] = []
    shape_texts = office._shape_texts

    def counted(shapes: Any, skip: int | None) -> Any:
        read.append(1)
        return shape_texts(shapes, skip)

    monkeypatch.setattr(office, "_shape_texts", counted)
    [err] = list(read_bytes(out.getvalue(), "deck.pptx", max_document_bytes=limit))
    assert isinstance(err, IngestError) and err.kind == "too_large", err
    assert len(read) == limit // 4010 + 1  # 4,000 bytes and a few a slide: stopped at the one past the limit


def test_a_pdf_stops_at_the_page_past_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    pages: list[int] = []
    extract = PageObject.extract_text

    def counted(self: PageObject, *args: Any, **kwargs: Any) -> str:
        pages.append(1)
        return extract(self, *args, **kwargs)

    pdf = FPDF()
    pdf.set_font("helvetica", size=8)
    for n in range(10):
        pdf.add_page()
        pdf.multi_cell(0, 4, f"page {n} " + "compressed text " * 250)  # 4 kB a page, deflated
    data = bytes(pdf.output())
    limit = len(data) + 100  # the file passes the size check; its text (40 kB) does not
    assert limit < 12_000
    monkeypatch.setattr(PageObject, "extract_text", counted)
    [err] = list(read_bytes(data, "text.pdf", max_document_bytes=limit))
    assert isinstance(err, IngestError) and err.kind == "too_large" and len(pages) < 4, (err, len(pages))


def _understated_xlsx(rows: int, cells: list[str], numbered: bool = True) -> bytes:
    """A workbook of `rows` rows of `cells` (a header row first; each cell ending in its row's
    number when `numbered`) whose sheet says it holds A1:B2 only."""
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "清单"
    sheet.append(["编号", "名称", "备注"])
    for n in range(1, rows):
        sheet.append([n, *(f"{c}{n}" if numbered else c for c in cells)])
    out = io.BytesIO()
    book.save(out)
    return _repacked(out.getvalue(), "xl/worksheets/sheet1.xml",
                     lambda xml: re.sub(r'<dimension ref="[^"]*"\s*/>', '<dimension ref="A1:B2"/>', xml, count=1))


def test_xlsx_rows_and_columns_past_an_understated_dimension_are_read() -> None:
    data = _understated_xlsx(10, ["名称", "备注"])
    assert b'A1:B2' in zipfile.ZipFile(io.BytesIO(data)).read("xl/worksheets/sheet1.xml")
    [doc] = list(read_bytes(data, "list.xlsx", max_document_bytes=MB))
    assert isinstance(doc, Document), doc
    lines = doc.sections[0].text.split("\n")
    assert lines[0] == "编号 | 名称 | 备注" and len(lines) == 10
    assert lines[9] == "编号: 9; 名称: 名称9; 备注: 备注9"  # row 10, column C


def test_a_large_xlsx_behind_an_understated_dimension_is_refused_while_read() -> None:
    data = _understated_xlsx(1_500, ["名称" * 10, "备注" * 10], numbered=False)  # 225 kB of text
    assert len(data) < 100_000
    [err] = list(read_bytes(data, "big.xlsx", max_document_bytes=100_000))
    assert isinstance(err, IngestError) and err.kind == "too_large" and "converted from xlsx" in err.reason, err


def test_an_xlsx_row_numbered_far_down_is_refused_not_walked_to() -> None:
    book = openpyxl.Workbook()
    book.active.append(["a", "b"])
    out = io.BytesIO()
    book.save(out)
    far = '<row r="900000000"><c r="A900000000" t="inlineStr"><is><t>z</t></is></c></row></sheetData>'
    data = _repacked(out.getvalue(), "xl/worksheets/sheet1.xml", lambda xml: xml.replace("</sheetData>", far, 1))
    [err] = list(read_bytes(data, "far.xlsx", max_document_bytes=10_000))  # 900 million empty rows before it
    assert isinstance(err, IngestError) and err.kind == "too_large", err
