"""Synonyms the knowledge owner curates: a file per index, applied to the analysed query.

Rationale: docs/design-notes.md, "indexes/synonyms.py".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from .analysis import QueryTerms, normalize, query_terms

EXPANSION_WEIGHT = 0.8
"""Multiplier of an expansion term's clause: below the user's own words (1.0), high enough
that a question made only of a colloquial word finds the page written in the formal one."""
MAX_RULES = 10_000
MAX_TERM_CHARS = 64
MAX_FILE_BYTES = 4 << 20

_LATIN_EDGE = re.compile(r"[0-9a-z]")


class SynonymError(ValueError):
    """A synonyms file that cannot be used. where: 'file:line' (or 'file' when unreadable)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}")


@dataclass(frozen=True, slots=True)
class Rule:
    """One left-hand term (normalized) and the terms it adds, with the file line it came from."""

    term: str
    adds: tuple[str, ...]
    line: int
    pattern: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class Synonyms:
    """The rules of one file. source: the file's path (for explain data); rules by first char."""

    source: str
    rules: tuple[Rule, ...] = ()
    _by_first: dict[str, tuple[Rule, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        by: dict[str, list[Rule]] = {}
        for r in self.rules:
            by.setdefault(r.term[0], []).append(r)
        self._by_first.update({k: tuple(v) for k, v in by.items()})

    def matches(self, text: str) -> list[Rule]:
        """Rules whose term occurs in `text` (normalized), in file order."""
        found = [r for ch in dict.fromkeys(text) for r in self._by_first.get(ch, ())
                 if r.term in text and r.pattern.search(text)]
        return sorted(found, key=lambda r: r.line)


def _pattern(term: str) -> re.Pattern[str]:
    """`term` found where its Latin ends do not continue a Latin word ('ai' not in 'email')."""
    head = r"(?<![0-9a-z])" if _LATIN_EDGE.match(term[0]) else ""
    tail = r"(?![0-9a-z])" if _LATIN_EDGE.match(term[-1]) else ""
    return re.compile(head + re.escape(term) + tail)


def _terms(part: str, where: str) -> list[str]:
    out = []
    for raw in part.split(","):
        term = normalize(raw.strip())
        term = " ".join(term.split())
        if not term:
            raise SynonymError(where, "has an empty term (two commas, or a comma at an end)")
        if len(term) > MAX_TERM_CHARS:
            raise SynonymError(where, f"has a term longer than {MAX_TERM_CHARS} characters")
        out.append(term)
    return list(dict.fromkeys(out))


def _line_rules(stripped: str, where: str, n: int) -> list[Rule]:
    """The rules of one non-blank, non-comment line. Raises SynonymError(where, problem)."""
    parts = stripped.split("=>")
    if len(parts) > 2:
        raise SynonymError(where, "has more than one '=>'")
    if len(parts) == 2:
        lhs, rhs = _terms(parts[0], where), _terms(parts[1], where)
        pairs = [(t, tuple(a for a in rhs if a != t)) for t in lhs]
    else:
        group = _terms(parts[0], where)
        if len(group) < 2:
            raise SynonymError(where, "names one term: a two-way rule is 'a, b[, c...]', a one-way rule "
                                      "'a => b'")
        pairs = [(t, tuple(a for a in group if a != t)) for t in group]
    return [Rule(t, adds, n, _pattern(t)) for t, adds in pairs if adds]


def parse(text: str, source: str) -> Synonyms:
    """The rules of a synonyms file's text (module doc for the format). source: the file name
    used in errors ('synonyms/hr.txt'). Raises SynonymError('source:line', problem)."""
    rules: list[Rule] = []
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        rules += _line_rules(stripped, f"{source}:{n}", n)
        if len(rules) > MAX_RULES:
            raise SynonymError(f"{source}:{n}", f"makes more than {MAX_RULES} rules")
    return Synonyms(source, tuple(rules))


def problems(text: str, source: str) -> list[tuple[int, str]]:
    """Every refused line of a synonyms file's text, not only the first: (line number, problem),
    in order; [] when `parse` takes the whole text. The rules are `parse`'s."""
    out: list[tuple[int, str]] = []
    count = 0
    for n, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            count += len(_line_rules(stripped, f"{source}:{n}", n))
        except SynonymError as exc:
            out.append((n, exc.problem))
        if count > MAX_RULES:
            out.append((n, f"makes more than {MAX_RULES} rules"))
            break
    return out


def load(path: Path, shown: str | None = None) -> Synonyms:
    """`parse` the UTF-8 file at `path`; errors name it as `shown` (default: the path).
    Raises SynonymError (unreadable, not UTF-8, over MAX_FILE_BYTES, a bad line)."""
    name = shown or str(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SynonymError(name, f"cannot be read: {exc.strerror}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise SynonymError(name, f"is larger than {MAX_FILE_BYTES >> 20} MiB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise SynonymError(f"{name}:{line}", "is not UTF-8") from None
    return parse(text, name)


def analysed(query: str, synonyms: Synonyms | None) -> QueryTerms:
    """The analysed query as an index searches it: `indexes.analysis.query_terms` expanded by the
    index's synonyms (`expand`; QueryTerms.expansions says which rule fired: explain data)."""
    return expand(query_terms(query), synonyms)


def expand(terms: QueryTerms, synonyms: Synonyms | None) -> QueryTerms:
    """`terms` with the terms of every rule that fires added (module doc), or `terms` itself
    when none does. The added terms are in `QueryTerms.expanded`; which rule added what is in
    `QueryTerms.expansions` as (question's term, added synonym) pairs, in file order."""
    if synonyms is None or not synonyms.rules:
        return terms
    fired = synonyms.matches(terms.text)
    if not fired:
        return terms
    words, bigrams, chars, latin = (dict.fromkeys(t) for t in (terms.words, terms.bigrams, terms.chars,
                                                               terms.latin))
    own = {*words, *bigrams, *chars, *latin}
    added: set[str] = set()
    expansions: list[tuple[str, str]] = []
    for rule in fired:
        for syn in rule.adds:
            if (rule.term, syn) in expansions:
                continue
            expansions.append((rule.term, syn))
            t = query_terms(syn)
            for target, toks in ((words, t.words), (bigrams, t.bigrams), (chars, t.chars), (latin, t.latin)):
                for tok in toks:
                    if tok not in own:
                        target.setdefault(tok, None)
                        added.add(tok)
    return replace(terms, words=tuple(words), bigrams=tuple(bigrams), chars=tuple(chars), latin=tuple(latin),
                   expanded=frozenset(added), expansions=tuple(expansions))
