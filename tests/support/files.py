"""Real files of the formats kbgate converts, made here with their writer libraries (fpdf2,
pypdf, python-docx): the format tests (tests/indexes/test_formats.py) and the document API's
uploads (tests/documents/) read the same files."""

from __future__ import annotations

import io
from pathlib import Path

import docx
from fpdf import FPDF
from PIL import Image
from pypdf import PdfReader, PdfWriter

CJK_FONT = Path("/usr/share/fonts/truetype/wqy/wqy-microhei.ttc")  # fonts-wqy-microhei (tests/ensure-tools.sh)


def cjk_pdf(pages: list[list[tuple[int, str, str]]], *, title: str = "部署指南") -> bytes:
    """A PDF whose pages hold (outline level or -1 for body text, size, text), with an outline."""
    assert CJK_FONT.is_file(), "fonts-wqy-microhei is missing: run tests/ensure-tools.sh"
    pdf = FPDF()
    pdf.add_font("wqy", fname=str(CJK_FONT))
    pdf.set_title(title)
    for page in pages:
        pdf.add_page()
        for level, size, text in page:
            pdf.set_font("wqy", size=size)
            if level >= 0:
                pdf.start_section(text, level=level)
            pdf.multi_cell(0, 8, text)
            pdf.ln(2)
    return bytes(pdf.output())


def guide_pdf() -> bytes:
    """'部署指南': two pages, headings 部署指南 > 安装 (page 1) and 配置 (page 2)."""
    return cjk_pdf([
        [(0, 20, "部署指南"), (-1, 11, "本指南介绍如何在生产环境部署 kbgate。"), (1, 16, "安装"),
         (-1, 11, "使用 pip 安装，然后运行 kbgate serve 启动网关。")],
        [(1, 16, "配置"), (-1, 11, "配置文件是 TOML 格式，每个键都有说明，修改后网关自动重新加载。")],
    ])


def encrypted_pdf(data: bytes, user_password: str) -> bytes:
    """`data` encrypted with this user password (''): only an owner password, it opens unasked."""
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(data)))
    writer.encrypt(user_password=user_password, owner_password="owner")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def scanned_pdf(pages: int = 1, text_on: int | None = None) -> bytes:
    """A PDF of `pages` pages holding an image each, and a text layer on page `text_on` only."""
    png = io.BytesIO()
    Image.new("RGB", (200, 100), (255, 255, 255)).save(png, format="PNG")
    pdf = FPDF()
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.image(io.BytesIO(png.getvalue()), x=10, y=10, w=100)
        if n == text_on:
            pdf.set_font("helvetica", size=12)
            pdf.multi_cell(0, 8, "A page with a text layer.")
    return bytes(pdf.output())


def docx_bytes(title: str, sections: list[tuple[str, str]]) -> bytes:
    """A Word file: `title` (the Title style), then each (Heading 1, paragraph)."""
    d = docx.Document()
    d.add_heading(title, 0)
    for heading, text in sections:
        d.add_heading(heading, 1)
        d.add_paragraph(text)
    out = io.BytesIO()
    d.save(out)
    return out.getvalue()


def deep_rst(levels: int) -> bytes:
    """A reStructuredText file of ever deeper block quotes: line i is 'x' indented i spaces,
    a paragraph of its own (levels=3000: 4.5 MB)."""
    return "".join(" " * i + "x\n\n" for i in range(levels)).encode("ascii")


def empty_runs_docx(runs: int) -> bytes:
    """A DOCX (python-docx's template) whose one paragraph holds `runs` empty runs (<w:r/>):
    no text at all, a few tens of KB on disk, 6 x `runs` bytes of markup unzipped."""
    import zipfile

    d = docx.Document()
    d.add_paragraph("x")
    template = io.BytesIO()
    d.save(template)
    src = zipfile.ZipFile(io.BytesIO(template.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        for info in src.infolist():
            if info.filename != "word/document.xml":
                dst.writestr(info.filename, src.read(info))
                continue
            head, rest = src.read(info).decode("utf-8").split("<w:body>", 1)
            with dst.open(info.filename, "w", force_zip64=True) as part:
                part.write((head + "<w:body><w:p>").encode("utf-8"))
                for _ in range(runs // 10_000):
                    part.write(b"<w:r/>" * 10_000)
                part.write(b"<w:r/>" * (runs % 10_000))
                part.write(("</w:p>" + rest[rest.index("<w:sectPr"):]).encode("utf-8"))
    return out.getvalue()
