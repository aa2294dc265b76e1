"""The docs a fresh reader follows: README.md is the front door (short), every relative link in
it and in docs/ (and the bench/ and deploy/ READMEs) reaches an existing file and, when it names
one, an existing heading; every docs/ file can be reached from README.md."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import ROOT

README_MAX_LINES = 220
DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "bench" / "README.md",
               ROOT / "bench" / "VECTORS.md", ROOT / "deploy" / "README.md"])
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def prose(text: str) -> str:
    """The text without fenced blocks and code spans (a link inside code is not a link)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(text: str) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped (letters, digits, '_' and '-'
    kept, in any script), spaces to '-', a repeated id suffixed -1, -2, …"""
    out: set[str] = set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6} (.+?)\s*#*\s*$", line)
        if m is None:
            continue
        heading = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m[1]).replace("`", "").replace("*", "")
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        n, candidate = 0, slug
        while candidate in out:
            n += 1
            candidate = f"{slug}-{n}"
        out.add(candidate)
    return out


def broken_links(doc: Path) -> list[str]:
    """Each relative link of `doc` whose file, or heading, does not exist, as 'target: why'."""
    bad = []
    for target in LINK.findall(prose(doc.read_text("utf-8"))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto: …: not ours to check
            continue
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text("utf-8")):
            bad.append(f"{target}: no heading #{anchor} in {dest.name}")
    return bad


def test_readme_is_a_front_door() -> None:
    lines = len((ROOT / "README.md").read_text("utf-8").splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move a role's part into docs/"


def test_every_relative_link_resolves() -> None:
    bad = {str(d.relative_to(ROOT)): b for d in DOCS if (b := broken_links(d))}
    assert bad == {}


def test_every_doc_is_reached_from_the_readme() -> None:
    seen: set[Path] = set()
    todo = [ROOT / "README.md"]
    while todo:
        doc = todo.pop()
        if doc in seen or doc.suffix != ".md" or not doc.exists():
            continue
        seen.add(doc)
        todo += [(doc.parent / t.partition("#")[0]).resolve() for t in LINK.findall(prose(doc.read_text("utf-8")))
                 if not re.match(r"[a-z][a-z0-9+.-]*:", t) and t.partition("#")[0]]
    assert sorted(p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in seen) == []


def test_the_checker_finds_a_broken_file_and_heading(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\n## Ret codes\n\n## Ret codes\n\n### 错误 `码`\n", "utf-8")
    doc = tmp_path / "b.md"
    doc.write_text("[ok](a.md#ret-codes) [ok](a.md#ret-codes-1) [ok](a.md#错误-码) [ok](#x)\n"
                   "[gone](missing.md) [gone](a.md#no-such) `[code](missing.md)` [web](https://x.y/z)\n"
                   "```\n[fenced](missing.md)\n```\n# x\n", "utf-8")
    assert broken_links(doc) == ["missing.md: no such file", "a.md#no-such: no heading #no-such in a.md"]


def test_the_demo_page_count_in_the_docs_is_the_demo_corpus() -> None:
    # docs/dify.md said "8 pages" of a demo that indexes 6 (deploy/demo/docs, `make run`).
    pages = sum(1 for p in (ROOT / "deploy" / "demo" / "docs").rglob("*.md") if p.is_file())
    counts = {(doc.name, int(n)) for doc in (ROOT / "docs").glob("*.md")
              for n in re.findall(r"demo \((\d+) pages\)", prose(doc.read_text("utf-8")))}
    assert counts and all(n == pages for _, n in counts), (pages, counts)


CITATION = re.compile(r"docs/([\w-]+\.md)[,:]?\s+\"([^\"]+)\"")
BOLD_LABEL = re.compile(r"(?m)^\*\*(.+?)\*\*")
HEADING = re.compile(r"(?m)^#{1,6} (.+?)\s*$")


def sections(text: str) -> set[str]:
    """A doc's citable sections: its headings and its bold paragraph labels ("**Reloading.** …"),
    without code marks, emphasis or a final full stop."""
    found = [m[1] for m in HEADING.finditer(FENCE.sub("", text))] + [m[1] for m in BOLD_LABEL.finditer(text)]
    return {re.sub(r"[`*]", "", s).strip().rstrip(".") for s in found}


def missing_sections(text: str, docs: dict[str, set[str]]) -> list[str]:
    """Each `docs/NAME.md, "Section"` cited in `text` that names no doc or no section of it (a
    cited section may be the start of a longer heading)."""
    bad = []
    for name, cited in CITATION.findall(text):
        cited = " ".join(cited.split())
        if not any(s == cited or s.startswith(cited) for s in docs.get(name, set())):
            bad.append(f"{name}: {cited}")
    return bad


def test_every_cited_section_exists() -> None:
    docs = {p.name: sections(p.read_text("utf-8")) for p in (ROOT / "docs").glob("*.md")}
    citing = [p for part in ("gateway", "indexes", "bench", "tests") for p in (ROOT / part).rglob("*.py")]
    citing += [*(ROOT / "docs").glob("*.md"), ROOT / "README.md"]
    bad = {str(p.relative_to(ROOT)): b for p in citing if (b := missing_sections(p.read_text("utf-8"), docs))}
    assert bad == {}


def test_the_citation_checker_finds_a_missing_section() -> None:
    docs = {"a.md": sections("# A\n\n## The cosine line\n\n**Reloading.** Text.\n")}
    text = 'see docs/a.md, "The cosine\n line"; docs/a.md "Reloading"; docs/a.md, "Gone"; docs/b.md, "X"'
    assert missing_sections(text, docs) == ["a.md: Gone", "b.md: X"]


def mapped_modules(text: str) -> set[str]:
    """The module paths the first fenced block under "## Module map" lists: one entry per line,
    two spaces of indent per level, a package as `name/` (its __init__.py), a module as `name.py`."""
    section = text.split("\n## Module map\n", 1)[1]
    block = section.split("```\n", 2)[1]
    out: set[str] = set()
    stack: list[str] = []
    for line in block.splitlines():
        depth = (len(line) - len(line.lstrip(" "))) // 2
        name = line.split()[0]
        del stack[depth:]
        if name.endswith("/"):
            stack.append(name)
            out.add("".join(stack) + "__init__.py")
        else:
            out.add("".join(stack) + name)
    return out


def test_the_architecture_map_lists_every_module() -> None:
    tree = {str(p.relative_to(ROOT)) for part in ("gateway", "indexes") for p in (ROOT / part).rglob("*.py")}
    mapped = mapped_modules((ROOT / "docs" / "architecture.md").read_text("utf-8"))
    assert sorted(tree - mapped) == [] and sorted(mapped - tree) == []


def test_the_map_reader_reads_packages_and_modules() -> None:
    text = ("x\n## Module map\n\n```\ngateway/   the gateway\n  cli.py    commands\n  core/\n    scope.py\n"
            "  ops.py\n```\n")
    assert mapped_modules(text) == {"gateway/__init__.py", "gateway/cli.py", "gateway/core/__init__.py",
                                    "gateway/core/scope.py", "gateway/ops.py"}


def test_where_to_read_next_is_on_the_readmes_first_screen() -> None:
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert lines.index("## Where to read next") < 60
