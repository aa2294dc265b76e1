"""The passage that answers a question: what every caller's snippet is (the Volcengine `Summary`).

Rationale: docs/design-notes.md, "indexes/passages.py".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from .background import specificity
from .relevance import Question, Unit, content_units
from .search import bounded

__all__ = ["FIRST_SHARE", "MIN_SECOND_CHARS", "OTHER_CHUNK", "Piece", "SEPARATOR", "passage", "question_of_terms",
           "sentences"]

SEPARATOR = "\n…\n"
"""Between the two windows of one Summary (the Volcengine wire shows it as ' … ')."""
FIRST_SHARE = (17, 20)
"""The first window's share of the budget when further chunks could fill the rest (all of it when the
hit has no further chunk)."""
MIN_SECOND_CHARS = 60
"""A second window is added only when at least this many characters of the budget are left."""
OTHER_CHUNK = 0.8
"""What a window of a further chunk of the document counts against one of the hit's own chunk."""
SECOND_SAME_DIVISOR = 2
"""A second window's own score counts 1 / this beside the value of the words new to the Summary."""

_LATIN_WORD = re.compile(r"[0-9a-z_]+(?:[.\-][0-9a-z_]+)*")
_END_CHARS = re.compile(r"[。！？；]+[”’」』）)\"']*|\n+|[.!?;]+")
_LATIN_ENDS = frozenset(".!?;")
_LATIN_BEFORE = re.compile(r"[A-Za-z)\]\"']")


@dataclass(frozen=True, slots=True)
class Piece:
    """One chunk a Summary may come from: heading (its section heading, '' if none), text (its
    body), fold (the text folded for matching, `indexes.analysis.fold_positions`, as stored at
    ingest; used when it has the text's length, else text.lower() is)."""

    heading: str
    text: str
    fold: str | None = None


@dataclass(frozen=True, slots=True)
class _Window:
    piece: int
    start: int  # character span in the piece's text
    end: int
    parts: frozenset[int]  # question parts held (`_parts`)
    score: int


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the non-blank sentences and lines of `text`, in order (the
    whitespace after a sentence end belongs to the next span)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _END_CHARS.finditer(text):
        at = m.start()
        if text[at] in _LATIN_ENDS:  # a Latin end only after a word and before a space: not in 3.5 or a.b
            after = m.end()
            if at == 0 or not _LATIN_BEFORE.match(text, at - 1) or (after < len(text) and not text[after].isspace()):
                continue
        if m.end() > start:
            spans.append((start, m.end()))
            start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if not text[s:e].isspace()]


def passage(pieces: Sequence[Piece], asked: Question, budget: int) -> str:
    """The Summary of a hit (module doc): at most `budget` characters from `pieces` (the hit's
    own chunk first). '' for budget <= 0 or no text; the head of the first piece when none of the
    question's words occur. Raises nothing."""
    if budget <= 0 or not pieces:
        return ""
    parts = _parts_of(asked.units)  # the same for every hit of a search
    values = [round(v * 1_000_000) for _, _, v in parts]  # whole micro-units: sums are exact, ties are ties
    read = [replace(_read(p, parts, values), number=i) for i, p in enumerate(pieces)]
    best = _best(read, values, budget if len(read) == 1 else budget * FIRST_SHARE[0] // FIRST_SHARE[1])
    if best is None or best.score <= 0:
        return bounded(_lead(pieces[0], pieces[0].text.strip()), budget)
    first = bounded(_lead(pieces[best.piece], pieces[best.piece].text[best.start:best.end].strip()), budget)
    room = budget - len(first) - len(SEPARATOR)
    if room < MIN_SECOND_CHARS:
        return first
    second = _best(read, values, room, best)
    if second is None or second.score <= 0:
        return first
    text = bounded(_lead(pieces[second.piece], pieces[second.piece].text[second.start:second.end].strip()), room)
    later = second.piece > best.piece or second.piece == best.piece and second.start > best.start
    return f"{first}{SEPARATOR}{text}" if later else f"{text}{SEPARATOR}{first}"


def question_of_terms(text: str) -> Question:
    """A `Question` of the normalised query `text` without an index's statistics (every domain
    weight 1), for a caller that has no `Question` of its search."""
    return Question([Unit(w, specificity(w), 1.0, _LATIN_WORD.fullmatch(w) is not None) for w in content_units(text)])


def _best(read: list[_Read], values: list[int], budget: int, after: _Window | None = None) -> _Window | None:
    """The window of the highest score, pieces weighed by OTHER_CHUNK; ties: the earliest. With
    `after` (the first window), a window's score is what it adds: the value of the words `after`
    does not hold plus its own score / SECOND_SAME_DIVISOR, 0 where it overlaps `after`."""
    best: tuple[_Read, int, int, int, int, int] | None = None
    best_score = 0.0
    for r in read:
        weight = 1.0 if r.number == 0 else OTHER_CHUNK
        for i, j, start, end, score in _windows(r, values, budget, after):
            if best is None or score * weight > best_score:
                best, best_score = (r, i, j, start, end, score), score * weight
    if best is None:
        return None
    r, i, j, start, end, score = best
    return _Window(r.number, start, end, frozenset().union(*r.at[i:j]), score)


def _lead(piece: Piece, text: str) -> str:
    """`text` led by the piece's heading unless the text already starts with it."""
    heading = piece.heading.strip()
    return text if not heading or text.startswith(heading) else f"{heading}\n{text}"


@lru_cache(maxsize=256)
def _parts_of(units: tuple[Unit, ...]) -> list[tuple[str, bool, float]]:
    return _parts(Question(units))


def _parts(asked: Question) -> list[tuple[str, bool, float]]:
    """What is looked for in a window: (text, latin, value) per part of each question word (module
    doc): a CJK word of n > 2 characters as its n - 1 bigrams, each worth 1 / (n - 1) of it; a
    Latin word whole; a synonym as its word."""
    out: list[tuple[str, bool, float]] = []
    for u in asked.units:
        value = u.weight * u.domain
        for word in (u.text, *(alt for alt, _ in u.alternatives)):
            latin = _LATIN_WORD.fullmatch(word) is not None
            if latin or len(word) <= 2:
                out.append((word, latin, value))
            else:
                grams = dict.fromkeys(word[i:i + 2] for i in range(len(word) - 1))
                out += [(g, False, value / len(grams)) for g in grams]
    return out


def _found(piece: Piece, parts: list[tuple[str, bool, float]]) -> list[tuple[int, int]]:
    """(position, part number) of every occurrence of the parts in the piece's folded text, by
    position; a Latin part only as a whole word (not inside a longer run of letters and digits)."""
    fold = piece.fold if piece.fold is not None and len(piece.fold) == len(piece.text) else piece.text.lower()
    found: list[tuple[int, int]] = []
    for k, (text, latin, _) in enumerate(parts):
        pos = fold.find(text)
        while pos >= 0:
            end = pos + len(text)
            alone = (pos == 0 or not fold[pos - 1].isalnum()) and (end == len(fold) or not fold[end].isalnum())
            if not latin or alone:
                found.append((pos, k))
            pos = fold.find(text, pos + 1)
    found.sort()
    return found


@dataclass(frozen=True, slots=True)
class _Read:
    """A piece read once for every window of it: its number, heading lead length, sentence spans,
    the parts each sentence holds, and each sentence's words with the next one's (the anchor)."""

    number: int
    lead: int
    spans: list[tuple[int, int]]
    at: list[frozenset[int]]
    local: list[int]


def _read(piece: Piece, parts: list[tuple[str, bool, float]], values: list[int]) -> _Read:
    spans = sentences(piece.text)
    found = _found(piece, parts)
    at: list[frozenset[int]] = []
    k = 0
    for s, e in spans:  # both in text order: one pass
        while k < len(found) and found[k][0] < s:
            k += 1
        held = set()
        while k < len(found) and found[k][0] < e:
            held.add(found[k][1])
            k += 1
        at.append(frozenset(held))
    local = [sum(values[p] for p in (at[i] | at[i + 1] if i + 1 < len(at) else at[i])) for i in range(len(at))]
    heading = piece.heading.strip()
    return _Read(0, len(heading) + 1 if heading else 0, spans, at, local)


def _windows(r: _Read, values: list[int], budget: int,
             after: _Window | None = None) -> list[tuple[int, int, int, int, int]]:
    """(first sentence, end sentence (exclusive), start char, end char, score) for each sentence of
    the piece: the longest run of sentences from it that fits `budget` with the heading lead,
    scored (module doc; with `after`, as `_best` says). A later start whose run reaches the
    piece's end holds a subset of the one before, and is not listed. One pass: the words held
    are counted in and out as the run's ends move."""
    spans, at, local = r.spans, r.at, r.local
    count = [0] * len(values)
    value = 0
    fresh = 0  # the value of the words held that `after` does not hold
    old = after.parts if after is not None else frozenset()
    out: list[tuple[int, int, int, int, int]] = []
    j = 0
    last = len(spans)
    for i, (s, _) in enumerate(spans):
        while j < last and (j == i or spans[j][1] - s + r.lead <= budget):
            for p in at[j]:
                count[p] += 1
                if count[p] == 1:
                    value += values[p]
                    if p not in old:
                        fresh += values[p]
            j += 1
        anchor = local[i]
        if i + 1 < j and local[i + 1] > anchor:
            anchor = local[i + 1]
        end = spans[j - 1][1]
        score = value + anchor
        if after is not None:
            overlaps = after.piece == r.number and s < after.end and after.start < end
            score = 0 if overlaps or score <= 0 else fresh + score // SECOND_SAME_DIVISOR
        out.append((i, j, s, end, score))
        if j == last:
            break
        for p in at[i]:  # sentence i leaves the run
            count[p] -= 1
            if count[p] == 0:
                value -= values[p]
                if p not in old:
                    fresh -= values[p]
    return out
