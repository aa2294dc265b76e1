"""Document formats: real PDF, DOCX, PPTX, XLSX and reStructuredText files made
here with their writer libraries, read through the one registry (indexes/ingest/formats.py)
into headings, titles and pages; what cannot be read is reported with its kind, never indexed."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import docx
import openpyxl
import pptx
import pytest
from fpdf import FPDF
from pypdf import PdfReader, PdfWriter

from indexes.ingest import read_data, read_paths
from indexes.ingest.formats import format_of, read_bytes
from indexes.store import IndexStore
from indexes.types import Document, IngestError, IngestWarning
from tests.support.files import encrypted_pdf, guide_pdf, scanned_pdf
from tests.support.paths import ROOT

MB = 10 * 1024 * 1024


def _docs(items: list[object]) -> list[Document]:
    return [d for d in items if isinstance(d, Document)]


def _errors(items: list[object]) -> list[IngestError]:
    return [e for e in items if isinstance(e, IngestError)]


def test_a_pdf_keeps_its_title_outline_headings_and_pages() -> None:
    [doc] = _docs(list(read_bytes(guide_pdf(), "guide.pdf", max_document_bytes=MB)))
    assert doc.title == "部署指南"
    assert [(s.heading, s.trail, s.page) for s in doc.sections] == [
        ("部署指南", "", 1), ("安装", "部署指南", 1), ("配置", "部署指南", 2)]
    assert doc.sections[1].text == "使用 pip 安装，然后运行 kbgate serve 启动网关。"  # its heading not repeated
    assert "TOML" in doc.sections[2].text


def test_a_pdf_without_outline_is_one_section_per_page() -> None:
    pdf = FPDF()
    for text in ("First page about rotation.", "Second page about retirement."):
        pdf.add_page()
        pdf.set_font("helvetica", size=12)
        pdf.multi_cell(0, 8, text)
    [doc] = _docs(list(read_bytes(bytes(pdf.output()), "plain.pdf", max_document_bytes=MB)))
    assert doc.title == "First page about rotation."  # no /Title, no outline: its first line
    assert [(s.heading, s.page) for s in doc.sections] == [("", 1), ("", 2)]


def test_an_encrypted_pdf_is_reported_and_one_with_only_an_owner_password_is_read() -> None:
    for user, expect in (("s3cret", "encrypted"), ("", None)):
        items = list(read_bytes(encrypted_pdf(guide_pdf(), user), "locked.pdf", max_document_bytes=MB))
        if expect is None:
            assert [d.title for d in _docs(items)] == ["部署指南"]
        else:
            [err] = items
            assert isinstance(err, IngestError) and err.kind == "encrypted" and "password" in err.reason


def test_an_image_only_pdf_is_reported_as_scanned_and_not_ingested() -> None:
    [err] = list(read_bytes(scanned_pdf(), "scan.pdf", max_document_bytes=MB))
    assert isinstance(err, IngestError) and err.kind == "no_text" and "scanned image without text" in err.reason
    items = list(read_bytes(scanned_pdf(3, text_on=2), "mixed.pdf", max_document_bytes=MB))
    [doc] = _docs(items)
    assert [s.page for s in doc.sections] == [2]
    [note] = [w for w in items if isinstance(w, IngestWarning)]
    assert "page(s) 1, 3 hold images without text" in note.reason


@pytest.mark.parametrize(("name", "data", "kind"), [
    ("bad.pdf", b"%PDF-1.7\n this is not a PDF body", "corrupt"),
    ("bad.docx", b"PK\x03\x04 truncated zip", "corrupt"),
    ("locked.docx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "encrypted"),
    ("bad.xlsx", b"plain text named xlsx", "corrupt"),
    ("notes.adoc", b"= Title\n\ntext\n", "unsupported"),
])
def test_a_file_that_cannot_be_read_is_an_error_of_its_kind(name: str, data: bytes, kind: str) -> None:
    [err] = list(read_bytes(data, name, max_document_bytes=MB))
    assert isinstance(err, IngestError) and err.kind == kind and err.file == name


def test_a_docx_keeps_title_heading_levels_and_tables() -> None:
    d = docx.Document()
    d.add_heading("密钥轮换手册", 0)
    d.add_paragraph("本手册说明如何轮换签名密钥。")
    d.add_heading("准备工作", 1)
    d.add_paragraph("先生成新密钥，旧密钥保留到所有客户端切换完成。")
    d.add_heading("检查清单", 2)
    table = d.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "步骤", (0, 1): "负责人", (1, 0): "生成密钥", (1, 1): "运维"}.items():
        table.cell(r, c).text = text
    d.add_heading("退役旧密钥", 1)
    d.add_paragraph("确认没有请求再使用旧密钥后退役。")
    out = io.BytesIO()
    d.save(out)
    [doc] = _docs(list(read_bytes(out.getvalue(), "manual.docx", max_document_bytes=MB)))
    assert doc.title == "密钥轮换手册"  # the Title style (no core title set)
    assert [(s.heading, s.trail) for s in doc.sections] == [
        ("", ""), ("准备工作", ""), ("检查清单", "准备工作"), ("退役旧密钥", "")]
    assert doc.sections[2].text == "步骤 | 负责人\n生成密钥 | 运维"


def test_a_pptx_takes_slide_titles_as_headings_and_slide_numbers_as_pages() -> None:
    deck = pptx.Presentation()
    for title, body, notes in (("季度回顾", "2025 第三季度", ""), ("收入增长", "收入同比增长 25%", "强调续约率"),
                               ("下季度计划", "上线文档同步功能", "")):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes:
            slide.notes_slide.notes_text_frame.text = notes
    out = io.BytesIO()
    deck.save(out)
    [doc] = _docs(list(read_bytes(out.getvalue(), "review.pptx", max_document_bytes=MB)))
    assert doc.title == "季度回顾"
    assert [(s.heading, s.text, s.page) for s in doc.sections] == [
        ("季度回顾", "2025 第三季度", 1), ("收入增长", "收入同比增长 25%\n强调续约率", 2),
        ("下季度计划", "上线文档同步功能", 3)]


def _workbook(rows: int = 2) -> bytes:
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.title = "价格表"
    sheet.append(["产品", "价格", "说明"])
    for n in range(rows):
        sheet.append([f"版本{n}", 99.0 + n, "每月"])
    contacts = book.create_sheet("联系人")
    contacts.append([None, None])
    contacts.append([7, "no header: a number first"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_an_xlsx_takes_sheet_names_as_headings_and_reads_rows_with_their_header() -> None:
    [doc] = _docs(list(read_bytes(_workbook(), "prices.xlsx", max_document_bytes=MB)))
    assert [s.heading for s in doc.sections] == ["价格表", "联系人"]
    assert doc.sections[0].text.split("\n") == ["产品 | 价格 | 说明", "产品: 版本0; 价格: 99; 说明: 每月",
                                                "产品: 版本1; 价格: 100; 说明: 每月"]
    assert doc.sections[1].text == "7 | no header: a number first"
    [err] = list(read_bytes(_workbook(rows=400), "big.xlsx", max_document_bytes=6000))  # 20 kB once unpacked
    assert isinstance(err, IngestError) and err.kind == "too_large"


def test_rst_sections_become_headings_and_nothing_outside_the_file_is_read(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET", encoding="utf-8")
    source = (f"==========\n运维手册\n==========\n\n前言。\n\n告警处理\n========\n\n先确认影响范围。\n\n"
              f"细节\n----\n\n查看 readyz。\n\n.. include:: {secret}\n\n.. raw:: html\n\n   <b>raw</b>\n")
    [doc] = _docs(list(read_bytes(source.encode(), "ops.rst", max_document_bytes=MB)))
    assert doc.title == "运维手册"
    assert [(s.heading, s.trail) for s in doc.sections] == [("", ""), ("告警处理", ""), ("细节", "告警处理")]
    assert "TOPSECRET" not in doc.text and "<b>" not in doc.text


def test_a_media_type_picks_the_format_over_the_name() -> None:
    assert format_of("upload", "application/pdf; qs=1") is not None
    assert format_of("a.PDF") is format_of("x", "application/pdf")
    assert format_of("a.bin") is None and format_of("a.bin", "application/zip") is None
    [doc] = _docs(list(read_data(guide_pdf(), "guides/upload", media_type="application/pdf", dataset="ds1",
                                 source="api")))
    assert (doc.id, doc.path, doc.dataset, doc.source) == ("ds1:guides/upload", "guides/upload", "ds1", "api")


def test_each_format_ingests_with_its_headings_and_pdf_pages_reach_the_hits(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.pdf").write_bytes(guide_pdf())
    (docs / "prices.xlsx").write_bytes(_workbook())
    (docs / "scan.pdf").write_bytes(scanned_pdf())
    items = list(read_paths([docs]))
    assert [e.where for e in _errors(items)] == ["scan.pdf"]
    index = IndexStore(tmp_path / "ix").create_or_open_for_write("docs")
    report = index.ingest(items, progress=False)
    assert (report.added, [w for w, _ in report.errors]) == (2, ["scan.pdf"])
    [hit] = index.search("配置文件 TOML 重新加载", limit=1)
    assert (hit.doc_id, hit.title, dict(hit.metadata).get("page")) == ("guide.pdf", "部署指南", 2)
    assert hit.content.startswith("配置")  # the chunk's section heading
    [hit] = index.search("版本1 价格", limit=1)
    assert hit.doc_id == "prices.xlsx" and "价格表" in hit.content and "page" not in dict(hit.metadata)


def test_the_converters_are_imported_only_when_a_file_needs_them() -> None:
    code = ("import sys, gateway.cli, indexes.ingest, indexes.ingest.formats; "
            "print(sorted(m for m in ('pypdf', 'docx', 'pptx', 'openpyxl', 'docutils') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


def test_the_cli_reports_every_file_it_did_not_ingest_and_a_run_that_ingested_nothing(tmp_path: Path) -> None:
    from tests.support.harness import kbgate

    cfg = tmp_path / "c.toml"
    cfg.write_text('[indexes]\ndir = "ix"\n', encoding="utf-8")
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.pdf").write_bytes(guide_pdf())
    (docs / "scan.pdf").write_bytes(scanned_pdf())
    (docs / "notes.adoc").write_text("= Notes\n", encoding="utf-8")
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(guide_pdf())))
    writer.encrypt(user_password="s3cret")
    with (docs / "locked.pdf").open("wb") as fh:
        writer.write(fh)

    def add(path: Path, index: str = "docs") -> subprocess.CompletedProcess[str]:
        return kbgate("index", "add", "--config", str(cfg), "--index", index, "--no-progress", str(path))

    r = add(docs)
    assert r.returncode == 1 and "index docs: 1 added" in r.stdout
    assert "skipped scan.pdf: scanned image without text" in r.stderr
    assert "skipped locked.pdf: encrypted PDF" in r.stderr
    assert "warning notes.adoc: unsupported file type '.adoc'" in r.stderr
    assert "nothing was indexed" not in r.stderr
    only = tmp_path / "scans"
    only.mkdir()
    (only / "scan.pdf").write_bytes(scanned_pdf())
    r = add(only, "scans")
    assert r.returncode == 1 and "skipped scan.pdf: scanned image without text" in r.stderr
    assert "nothing was indexed and no index was created" in r.stderr and "index scans: 0 added" in r.stdout
