"""Gap groups: the kept questions (one record per question key) joined into groups of exact
repeats (one key) and near-duplicates (term-hash sets with Jaccard ≥ NEAR), at read time.

Rationale: docs/design-notes.md, "gateway/console/gaps/groups.py".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

NEAR = 0.5
MIN_GROUP_PREFIX = 8  # leading characters of a group id that name it when filing (ids: 32 hex)
MAX_POSTING = 50


@dataclass(slots=True)
class Question:
    """One kept question: its key, term hashes and counters (times are unix seconds; days
    'YYYY-MM-DD' UTC). best: the hits it got last ({index, doc_id, title, path, relevance,
    revision}); examples: its texts (masked; only with gaps.keep_text), newest first."""

    key: str
    terms: tuple[str, ...] = ()
    count: int = 0
    no_answer: int = 0
    low_score: int = 0
    first: float = 0.0
    last: float = 0.0
    days: Counter[str] = field(default_factory=Counter)
    callers: Counter[str] = field(default_factory=Counter)
    routes: Counter[str] = field(default_factory=Counter)
    best: list[dict[str, Any]] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    near: list[dict[str, Any]] = field(default_factory=list)  # a no-hit question's nearest pages, with why


@dataclass(slots=True)
class Group:
    """Questions joined by `group` (fields as Question's, summed; `questions`: how many distinct
    keys, `keys`: which)."""

    id: str
    questions: int
    count: int
    no_answer: int
    low_score: int
    first: float
    last: float
    days: Counter[str]
    callers: Counter[str]
    routes: Counter[str]
    best: list[dict[str, Any]]
    examples: list[str]
    keys: tuple[str, ...] = ()  # its questions' keys
    near: list[dict[str, Any]] = field(default_factory=list)  # nearest pages of its latest no-hit question
    example_routes: list[tuple[str, ...]] = field(default_factory=list)  # each example's question's route labels

    def public(self) -> dict[str, Any]:
        """The group as JSON (days sorted, callers and routes most frequent first)."""
        return {"id": self.id, "questions": self.questions, "count": self.count, "no_answer": self.no_answer,
                "low_score": self.low_score, "first_seen": self.first, "last_seen": self.last,
                "days": dict(sorted(self.days.items())), "callers": dict(self.callers.most_common()),
                "routes": dict(self.routes.most_common()), "best_hits": self.best, "examples": self.examples,
                "near_misses": self.near}


def jaccard(a: tuple[str, ...], b: tuple[str, ...]) -> float:
    """|a ∩ b| / |a ∪ b| of two term-hash sets (0 when both are empty)."""
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else 0.0


def group(questions: list[Question], max_examples: int = 5) -> list[Group]:
    """Exact repeats are one Question already; join near-duplicates (module doc). Returns the
    groups, most asked first (then most recent)."""
    parent = list(range(len(questions)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    postings: dict[str, list[int]] = {}
    for i, q in enumerate(questions):
        for t in q.terms:
            postings.setdefault(t, []).append(i)
    for members in postings.values():
        if len(members) > MAX_POSTING:
            continue
        for x, i in enumerate(members):
            for j in members[x + 1:]:
                if find(i) != find(j) and jaccard(questions[i].terms, questions[j].terms) >= NEAR:
                    parent[find(j)] = find(i)
    joined: dict[int, list[Question]] = {}
    for i, q in enumerate(questions):
        joined.setdefault(find(i), []).append(q)
    return sorted((_merge(m, max_examples) for m in joined.values()), key=lambda g: (-g.count, -g.last))


def _merge(members: list[Question], max_examples: int) -> Group:
    first = min(members, key=lambda q: (q.first, q.key))
    latest = max(members, key=lambda q: q.last)
    days: Counter[str] = Counter()
    callers: Counter[str] = Counter()
    routes: Counter[str] = Counter()
    examples: list[str] = []
    example_routes: list[tuple[str, ...]] = []
    for q in sorted(members, key=lambda q: -q.last):
        days.update(q.days)
        callers.update(q.callers)
        routes.update(q.routes)
        for e in q.examples:
            if e not in examples:
                examples.append(e)
                example_routes.append(tuple(q.routes))
    return Group(first.key, len(members), sum(q.count for q in members), sum(q.no_answer for q in members),
                 sum(q.low_score for q in members), first.first, latest.last, days, callers, routes,
                 latest.best, examples[:max_examples], tuple(q.key for q in members),
                 next((q.near for q in sorted(members, key=lambda q: -q.last) if q.near), []),
                 example_routes[:max_examples])
