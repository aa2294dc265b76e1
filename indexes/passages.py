"""The passage that answers a question: what every caller's snippet is (the Volcengine `Summary`).

Candidates are sentence-aligned windows of a hit's chunks: its own chunk first, then the further
chunks of its document that its content carries (`indexes.hits.make_hit`). Sentences end at
。！？； (with a closing quote or bracket), at a line end (a list item, a table row, a code line is
one unit) and at a Latin . ! ? ; before a space, so nothing is cut inside a word, a number, a
version string or a code span; a single unit longer than the budget is cut by
`indexes.search.bounded`.

A window scores the question's content words it holds (`indexes.relevance.Question`: each word its
specificity times its domain weight, as the lexical relevance weighs it; a CJK word of more than
two characters counts bigram by bigram, so 默认值 is half found in 默认为; a synonym counts as its
word), plus the words held by the sentence it starts with and the one after (answers sit next to
the question's words, and a window that starts there reads on to them). A window of another chunk
than the hit's own counts OTHER_CHUNK of its score: the ranking chose the hit's chunk. Ties go to
the earliest window. The window leads with its section heading unless it starts with it. When
room is left, the next best window elsewhere (any chunk, not overlapping) fills it, after
SEPARATOR. docs/search-quality.md, "The Summary", has the measurements behind each rule.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .background import specificity
from .relevance import Question, Unit, content_units
from .search import bounded

__all__ = ["MIN_SECOND_CHARS", "OTHER_CHUNK", "Piece", "SEPARATOR", "passage", "question_of_terms", "sentences"]

SEPARATOR = "\n…\n"
"""Between the two windows of one Summary (the Volcengine wire shows it as ' … ')."""
MIN_SECOND_CHARS = 60
"""A second window is added only when at least this many characters of the budget are left."""
OTHER_CHUNK = 0.8
"""What a window of a further chunk of the document counts against one of the hit's own chunk."""
SECOND_SAME = 0.5
"""What a second window's words already in the first count, against words new to the Summary."""

_LATIN_WORD = re.compile(r"[0-9a-z_]+(?:[.\-][0-9a-z_]+)*")
_END = re.compile(r"[。！？；]+[”’」』）)\"']*|\n+|(?<=[A-Za-z)\]\"'])[.!?;]+(?=\s|$)")


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
    score: float


def sentences(text: str) -> list[tuple[int, int]]:
    """(start, end) character spans of the non-blank sentences and lines of `text`, in order (the
    whitespace after a sentence end belongs to the next span)."""
    spans: list[tuple[int, int]] = []
    start = 0
    for m in _END.finditer(text):
        if m.end() > start:
            spans.append((start, m.end()))
            start = m.end()
    if start < len(text):
        spans.append((start, len(text)))
    return [(s, e) for s, e in spans if text[s:e].strip()]


def passage(pieces: Sequence[Piece], asked: Question, budget: int) -> str:
    """The Summary of a hit (module doc): at most `budget` characters from `pieces` (the hit's
    own chunk first). '' for budget <= 0 or no text; the head of the first piece when none of the
    question's words occur. Raises nothing."""
    if budget <= 0 or not pieces:
        return ""
    parts = _parts(asked)
    values = [v for _, _, v in parts]
    found = [_found(p, parts) for p in pieces]
    best = _best(pieces, found, values, budget, lambda w: w.score)
    if best is None or best.score <= 0:
        return bounded(_lead(pieces[0], pieces[0].text.strip()), budget)
    first = bounded(_lead(pieces[best.piece], pieces[best.piece].text[best.start:best.end].strip()), budget)
    room = budget - len(first) - len(SEPARATOR)
    if room < MIN_SECOND_CHARS:
        return first

    def gain(w: _Window) -> float:
        if w.piece == best.piece and w.start < best.end and best.start < w.end or w.score <= 0:
            return 0.0
        return sum(values[k] for k in w.parts - best.parts) + SECOND_SAME * w.score

    second = _best(pieces, found, values, room, gain)
    if second is None or gain(second) <= 0:
        return first
    text = bounded(_lead(pieces[second.piece], pieces[second.piece].text[second.start:second.end].strip()), room)
    later = second.piece > best.piece or second.piece == best.piece and second.start > best.start
    return f"{first}{SEPARATOR}{text}" if later else f"{text}{SEPARATOR}{first}"


def question_of_terms(text: str) -> Question:
    """A `Question` of the normalised query `text` without an index's statistics (every domain
    weight 1), for a caller that has no `Question` of its search."""
    return Question([Unit(w, specificity(w), 1.0, _LATIN_WORD.fullmatch(w) is not None) for w in content_units(text)])


def _best(pieces: Sequence[Piece], found: list[list[tuple[int, int]]], values: list[float], budget: int,
          rank: Callable[[_Window], float]) -> _Window | None:
    """The window of the highest rank(window), pieces weighed by OTHER_CHUNK; ties: the earliest."""
    best: _Window | None = None
    best_score = 0.0
    for i, piece in enumerate(pieces):
        weight = 1.0 if i == 0 else OTHER_CHUNK
        for w in _windows(i, piece, found[i], values, budget):
            score = rank(w) * weight
            if best is None or score > best_score:
                best, best_score = w, score
    return best


def _lead(piece: Piece, text: str) -> str:
    """`text` led by the piece's heading unless the text already starts with it."""
    heading = piece.heading.strip()
    return text if not heading or text.startswith(heading) else f"{heading}\n{text}"


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


def _windows(number: int, piece: Piece, found: list[tuple[int, int]], values: list[float],
             budget: int) -> list[_Window]:
    """For each sentence of the piece, the longest run of sentences from it that fits `budget`
    with the heading lead, scored (module doc). A later start whose run reaches the piece's end
    holds a subset of the one before, and is not listed."""
    spans = sentences(piece.text)
    if not spans:
        return []
    heading = piece.heading.strip()
    lead = len(heading) + 1 if heading else 0
    at = [frozenset(k for pos, k in found if s <= pos < e) for s, e in spans]
    local = [sum(values[k] for k in at[i] | (at[i + 1] if i + 1 < len(at) else frozenset())) for i in range(len(at))]
    out: list[_Window] = []
    j = 0
    for i, (s, _) in enumerate(spans):
        j = max(j, i + 1)
        while j < len(spans) and spans[j][1] - s + lead <= budget:
            j += 1
        held = frozenset().union(*at[i:j])
        anchor = max(local[i], local[i + 1] if i + 1 < j else 0.0)
        out.append(_Window(number, s, spans[j - 1][1], held, sum(values[k] for k in held) + anchor))
        if j == len(spans):
            break
    return out
