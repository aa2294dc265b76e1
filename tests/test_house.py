"""The tree holds the present: no history references (a spec is cited by its title, dated history
is CHANGELOG.md) and module docstrings that say what in a few lines (docs/design-notes.md holds
the rationale)."""

from __future__ import annotations

import ast
import re
import statistics
import subprocess
from pathlib import Path

from tests.support.paths import ROOT

HISTORY = re.compile(r"\b(?:issue|stop|seed)s?\s?#?\d+", re.I)
TEXT_SUFFIXES = {".py", ".md", ".html", ".toml", ".cfg", ".txt", ".yaml", ".yml", ".sh", ".po", ".css", ".json"}
DOCSTRING_MEDIAN, DOCSTRING_MAX = 6, 15
CODE = ("gateway", "indexes", "bench", "tests")


def tracked() -> list[Path]:
    """Every file git tracks (the clean clone CI sees), as paths under ROOT."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in out.decode().split("\0") if name]


def history_references(text: str) -> list[str]:
    """Each issue, stop or seed number (the word, a space or '#', digits; any case) in `text`."""
    return HISTORY.findall(text)


def docstring_lines(path: Path) -> int:
    """Source lines of the module docstring of `path`, quotes included; 0 without one."""
    body = ast.parse(path.read_text("utf-8")).body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return (first.end_lineno or first.lineno) - first.lineno + 1
    return 0


def test_the_finder_finds_history() -> None:
    said = ["is" + "sue 12", "St" + "op 3", "se" + "ed 003", "is" + "sue #4"]  # never literal here
    assert history_references(f"see {said[0]}, {said[1]} and {said[2]}; {said[3]}") == said
    assert history_references("an issued ref; stops at 3; the seed= 7") == []


def test_no_issue_stop_or_seed_numbers_outside_the_changelog() -> None:
    found = {}
    for path in tracked():
        if path.name == "CHANGELOG.md" or path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue
        hits = history_references(path.read_text("utf-8", errors="replace"))
        if hits:
            found[str(path.relative_to(ROOT))] = hits
    assert found == {}


def test_module_docstrings_say_what_in_a_few_lines() -> None:
    lengths = {str(p.relative_to(ROOT)): docstring_lines(p) for part in CODE for p in (ROOT / part).rglob("*.py")}
    documented = [n for n in lengths.values() if n]
    assert statistics.median(documented) <= DOCSTRING_MEDIAN
    assert {p: n for p, n in lengths.items() if n > DOCSTRING_MAX} == {}


def test_the_docstring_counter_counts_quotes_and_all(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text('"""One.\n\nTwo.\n"""\nX = 1\n', "utf-8")
    assert docstring_lines(module) == 4
    module.write_text("X = 1\n", "utf-8")
    assert docstring_lines(module) == 0
