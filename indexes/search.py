"""Query building and excerpts (pure functions over a Tantivy schema); scope filters are
`indexes.filters` (re-exported here).

Rationale: docs/design-notes.md, "indexes/search.py".
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import tantivy
from tantivy import Occur, Query

from .analysis import QueryTerms
from .filters import filter_query, glob_to_regex
from .profile import Profile, documents_with, profile
from .relevance import Question, question
from .synonyms import EXPANSION_WEIGHT
from .types import SearchFilter

__all__ = [
    "Boosts",
    "DEFAULT_BOOSTS",
    "DocFreqs",
    "bounded",
    "build_query",
    "excerpt",
    "filter_query",
    "glob_to_regex",
    "idf",
    "ideal_score",
    "query_plan",
    "question_of",
    "QueryPlan",
    "terms_query",
]


@dataclass(frozen=True, slots=True)
class Boosts:
    """Weights of the query's clauses (0 drops a clause).

    body_words, body_latin, body_bigrams, body_unigrams: multipliers of the BM25 score of the
        query's words, Latin words, bigrams and lone characters on the body fields (1.0 =
        unboosted; bigrams and characters share the body_chars field). Latin words (an
        identifier, an error code, a product name in a Chinese question) weigh double: up to
        schema 5 they were indexed in two fields (words and bigrams) and so counted twice;
        schema 6 indexes them once and keeps their weight (make eval: at 1.0 the colloquial
        set's MRR fell from 0.8425 to 0.8069, at 2.0 it is 0.8556; see the commit message).
    title: score added to every chunk of a document whose title holds a query term, per
        term, times that term's document-level IDF (see `terms_query`).
    title_unigrams: multiplier of the BM25 score of the query's lone characters in titles.
    joins: multiplier of a bigram that spans two words of the query (QueryTerms.joins).
    common: multiplier of a common term's BM25 score (see COMMON_TERM_RATIO).
    """

    body_words: float = 1.0
    body_bigrams: float = 1.0
    title: float = 0.5
    body_unigrams: float = 1.0
    title_unigrams: float = 2.0
    joins: float = 0.5
    common: float = 0.5
    body_latin: float = 2.0


DEFAULT_BOOSTS = Boosts()

COMMON_TERM_RATIO = 0.2
COMMON_TERM_MIN_CHUNKS = 100
"""A body word, bigram or character found in more than COMMON_TERM_RATIO of an index's chunks (and in
more than COMMON_TERM_MIN_CHUNKS, so that a small index has no common term) is a common
term: it selects no document by itself and only adds its score (times `Boosts.common`) to
chunks that match a rarer term of the query, unless every term of the query is common. The
cutoff-frequency rule of Lucene's CommonTermsQuery. Why: corpus-specific stop words ("tidb",
"数据", "使用" in the TiDB docs) whose many weak matches outweighed a question's one rare term
. Ratios 0.05, 0.1, 0.15, 0.2, 0.3 compared on make eval; see the commit message."""




def idf(df: int, n: int) -> float:
    """BM25's inverse document frequency (Robertson–Spärck Jones, as Lucene and Tantivy
    compute it): ln(1 + (n - df + 0.5) / (df + 0.5)); df of n documents."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class DocFreqs:
    """Document frequencies of terms, read from a searcher and remembered.

    A query asks for the frequency of each of its terms in up to four fields; questions share
    most of their terms, so a bounded memo saves most of those calls. Frequencies move only
    with commits: `KnowledgeIndex` drops the memo when it reloads (a frequency may lag a
    commit by up to RELOAD_CHECK_SECONDS, which only nudges scores).
    """

    MAX_ENTRIES = 100_000

    def __init__(self) -> None:
        self._memo: dict[tuple[str, str], int] = {}
        self._documents: dict[tuple[str, tuple[str, ...]], int] = {}
        self._profile: Profile | None = None

    def get(self, searcher: tantivy.Searcher, field: str, term: str) -> int:
        """How many Tantivy documents (chunks) of `searcher` hold `term` in `field`."""
        key = (field, term)
        df = self._memo.get(key)
        if df is None:
            if len(self._memo) >= self.MAX_ENTRIES:
                self._memo.clear()
            df = self._memo[key] = searcher.doc_freq(field, term)
        return df

    def documents_with(self, searcher: tantivy.Searcher, schema: tantivy.Schema, term: str,
                       fields: tuple[str, ...]) -> int:
        """How many documents of `searcher` hold `term` in any of `fields` (`indexes.profile`)."""
        key = (term, fields)
        n = self._documents.get(key)
        if n is None:
            if len(self._documents) >= self.MAX_ENTRIES:
                self._documents.clear()
            n = self._documents[key] = documents_with(searcher, schema, fields, term)
        return n

    def profile(self, searcher: tantivy.Searcher, schema: tantivy.Schema) -> Profile:
        """The index's `indexes.profile.Profile`, once per commit loaded."""
        if self._profile is None:
            self._profile = profile(searcher, schema)
        return self._profile

    def clear(self) -> None:
        self._memo.clear()
        self._documents.clear()
        self._profile = None


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """The scored clauses of one query: (field, term, weight) of the body and title-character
    term queries that select chunks, of the common terms that only add to them, and
    (field, term, constant) of the title clauses."""

    selecting: list[tuple[str, str, float]]
    common: list[tuple[str, str, float]]
    titles: list[tuple[str, str, float]]


def query_plan(terms: QueryTerms, searcher: tantivy.Searcher, boosts: Boosts = DEFAULT_BOOSTS,
               doc_freqs: DocFreqs | None = None) -> QueryPlan:
    """The scored clauses of `terms` on `searcher` (`QueryPlan`): what `terms_query` builds and
    `ideal_score` sums; a search computes it once and hands it to both."""
    df = (doc_freqs or DocFreqs()).get
    chunks = searcher.num_docs
    body = [(field, tok, boost) for field, tokens, boost in (("body_words", terms.words, boosts.body_words),
                                                            ("body_latin", terms.latin, boosts.body_latin),
                                                            ("body_chars", terms.bigrams, boosts.body_bigrams),
                                                            ("body_chars", terms.chars, boosts.body_unigrams))
            if boost > 0 for tok in tokens]
    cutoff = max(COMMON_TERM_RATIO * chunks, COMMON_TERM_MIN_CHUNKS)
    rare = [b for b in body if df(searcher, b[0], b[1]) <= cutoff] or body
    common = [b for b in body if b not in rare] if boosts.common > 0 else []
    chars = set(terms.chars)
    selecting = [*rare, *(("title_chars", tok, boosts.title_unigrams) for field, tok, _ in rare
                          if field == "body_chars" and tok in chars and boosts.title_unigrams > 0)]
    selecting = [(field, tok, boost * boosts.joins if field == "body_chars" and tok in terms.joins else boost)
                 for field, tok, boost in selecting]
    if terms.expanded:  # a synonym's terms weigh less than the user's own words (indexes.synonyms)
        selecting = [(f, t, b * EXPANSION_WEIGHT if t in terms.expanded else b) for f, t, b in selecting]
        common = [(f, t, b * EXPANSION_WEIGHT if t in terms.expanded else b) for f, t, b in common]
    titles: list[tuple[str, str, float]] = []
    if boosts.title > 0:
        n = searcher.doc_freq("chunk", 0)  # documents: one chunk 0 each
        for field, doc_field, tokens in (("title_words", "doc_title_words", (*terms.words, *terms.latin)),
                                         ("title_chars", "doc_title_chars", terms.bigrams)):
            for tok in tokens:
                in_titles = df(searcher, doc_field, tok)
                if in_titles:
                    weight = EXPANSION_WEIGHT if tok in terms.expanded else 1.0
                    titles.append((field, tok, weight * boosts.title * idf(in_titles, n)))
    return QueryPlan(selecting, [(f, t, boosts.common * b) for f, t, b in common], titles)


def terms_query(schema: tantivy.Schema, terms: QueryTerms, searcher: tantivy.Searcher,
                boosts: Boosts = DEFAULT_BOOSTS, doc_freqs: DocFreqs | None = None,
                plan: QueryPlan | None = None) -> Query | None:
    """OR of term queries: words on body_words, Latin words on body_latin, bigrams and lone CJK
    characters on body_chars (BM25 over chunks), lone characters on title_chars, and a title
    clause per word, Latin word and bigram.

    Body terms in more than COMMON_TERM_RATIO of the chunks (and more than
    COMMON_TERM_MIN_CHUNKS) only score chunks that match a rarer term (unless all terms are
    common); a bigram spanning two query words weighs `boosts.joins`.

    A title clause adds `boosts.title × idf(df, documents)` to every chunk of a document whose
    title holds the term, where df counts documents (the doc_title_* fields of chunk 0), not
    chunks. Why: every chunk carries its document's title, so BM25 over the title fields
    counted a title term once per chunk and gave the titles of long pages a lower IDF than
    those of short ones; and titles are short, so BM25's length normalization let a title
    match outweigh the body. Measured with `make eval` (see the commit message).
    """
    plan = plan or query_plan(terms, searcher, boosts, doc_freqs)
    clauses: list[tuple[Occur, Query]] = []
    for field, tok, boost in plan.selecting:
        q = Query.term_query(schema, field, tok)
        clauses.append((Occur.Should, q if boost == 1.0 else Query.boost_query(q, boost)))
    for field, tok, constant in plan.titles:
        clauses.append((Occur.Should, Query.const_score_query(Query.term_query(schema, field, tok), constant)))
    if not clauses:
        return None
    if not plan.common:
        return Query.boolean_query(clauses)
    scoring_only = [(Occur.Should, Query.boost_query(Query.term_query(schema, field, tok), weight))
                    for field, tok, weight in plan.common]
    return Query.boolean_query([(Occur.Must, Query.boolean_query(clauses)), *scoring_only])


def ideal_score(terms: QueryTerms, searcher: tantivy.Searcher, boosts: Boosts = DEFAULT_BOOSTS,
                doc_freqs: DocFreqs | None = None, plan: QueryPlan | None = None) -> float:
    """What `terms_query` scores on a chunk of average length whose body holds every query term
    once: Σ weight × idf over its BM25 clauses (BM25's term-frequency part is 1 at tf = 1 and
    average length, whatever k1 and b). The query's IDF mass: a term the index lacks counts at
    idf(0, n), the highest there is, so a question about things the corpus never mentions has
    most of its mass unmatched. Title clauses are left out: a title match is further evidence
    on top of the body's (a page titled with the question's words whose body holds the rest
    is a full match, not two thirds of one). A synonym's added terms are left out too: they are
    other ways to match the question's words, not more of the question, so a page that matches
    the user's words is not judged less relevant for a synonym it lacks. 0.0 when the query has
    no BM25 clause. Units: BM25 points, the same as Hit.scores.bm25 of the same search
    (`indexes.relevance`)."""
    plan = plan or query_plan(terms, searcher, boosts, doc_freqs)
    df = (doc_freqs or DocFreqs()).get
    n = searcher.num_docs
    return sum(weight * idf(df(searcher, field, tok), n) for field, tok, weight in (*plan.selecting, *plan.common)
               if tok not in terms.expanded)


def question_of(terms: QueryTerms, searcher: tantivy.Searcher, schema: tantivy.Schema,
                doc_freqs: DocFreqs) -> Question:
    """The analysed query's content words judged against the index `searcher` shows
    (`indexes.relevance.question` of `terms.text`, the query already normalised; statistics
    memoised in `doc_freqs`), with the synonyms that fired (`terms.expansions`): what each hit's
    lexical relevance is computed from."""
    return question(terms.text, lambda term, fields: doc_freqs.documents_with(searcher, schema, term, fields),
                    doc_freqs.profile(searcher, schema).expected, terms.expansions)


def build_query(
    schema: tantivy.Schema,
    terms: QueryTerms,
    searcher: tantivy.Searcher,
    flt: SearchFilter | None = None,
    boosts: Boosts = DEFAULT_BOOSTS,
    *,
    filters: tuple[Query | None, Query | None] | None = None,
    doc_freqs: DocFreqs | None = None,
    plan: QueryPlan | None = None,
) -> Query | None:
    """The full search query, or None when the query has no searchable term.

    searcher: the searcher the query will run on (term document frequencies); doc_freqs: a
    memo of them kept by the caller across queries (a fresh one when None). plan: `query_plan` of
    the same arguments when the caller has it (it is also what `ideal_score` needs: computed once).
    filters: `filter_query(schema, flt)` computed earlier (callers cache it: building the
    glob regex queries costs more than the search itself); computed here when None.
    """
    scored = terms_query(schema, terms, searcher, boosts, doc_freqs, plan)
    if scored is None:
        return None
    must, must_not = filters if filters is not None else filter_query(schema, flt)
    clauses: list[tuple[Occur, Query]] = [(Occur.Must, scored)]
    if must is not None:
        clauses.append((Occur.Must, must))
    if must_not is not None:
        clauses.append((Occur.MustNot, must_not))
    return Query.boolean_query(clauses)


_SENTENCE_END_CHARS = "。！？!?；;\n"
_SENTENCE_END = re.compile(f"[{_SENTENCE_END_CHARS}]")


def bounded(text: str, max_chars: int) -> str:
    """`text` cut to at most max_chars characters, at a sentence end when one lies in the
    last 40% of the window, else at a character boundary with '…' (within the bound)."""
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    window = text[:max_chars]
    end = max(map(window.rfind, _SENTENCE_END_CHARS)) + 1  # after the last sentence end, 0 if none
    if end and end >= 0.6 * max_chars:
        return window[:end].rstrip()
    return window[: max_chars - 1].rstrip() + "…"


def excerpt(text: str, terms: QueryTerms, max_chars: int, *, folded: str | None = None) -> str:
    """A query-biased plain-text window of `text`, at most max_chars characters.

    The window starts at the sentence start (or text start) whose following
    max_chars characters contain the most distinct query bigrams/words; ties go to
    the earliest. Matching is on `folded` (`analysis.fold_positions(text)`, stored at index
    time where it differs from `text.lower()`) or on `text.lower()`; when folding changed
    the length, the text start is used. Work: one scan per query term and one pass over
    the sentence starts, whatever the number of terms. Raises nothing; returns '' for
    max_chars <= 0.
    """
    if max_chars <= 0 or not text:
        return ""
    if len(text) <= max_chars:
        return text.strip()
    norm = folded if folded is not None and len(folded) == len(text) else text.lower()
    start = _best_start(norm, terms, max_chars) if len(norm) == len(text) else 0
    while start < len(text) and text[start].isspace():
        start += 1
    return bounded(text[start:], max_chars)


def _best_start(norm: str, terms: QueryTerms, max_chars: int) -> int:
    """The first sentence start s of `norm` whose window [s, s + max_chars - 2] holds the
    start of an occurrence of the most distinct terms (0 when no term occurs).

    First one `find` per term: when every term present starts within the first window, that
    window (s = 0) is the answer (no later one holds more, ties go to the earliest), which is
    about half of the excerpts of a callback; only otherwise is every occurrence collected."""
    firsts: list[tuple[int, str]] = []
    for term in {*terms.bigrams, *terms.latin} | {w for w in terms.words if len(w) > 1}:
        pos = norm.find(term)
        if pos >= 0:
            firsts.append((pos, term))
    if not firsts:
        return 0
    if max(pos for pos, _ in firsts) <= max_chars - 2:
        return 0
    hits: list[tuple[int, int]] = []  # (position, term number), every occurrence
    for k, (pos, term) in enumerate(firsts):
        while pos >= 0:
            hits.append((pos, k))
            pos = norm.find(term, pos + 1)
    hits.sort()
    present = len(firsts)
    counts = [0] * present
    distinct = best = 0
    start = added = dropped = 0
    ends = _SENTENCE_END.finditer(norm, 0, len(norm) - 1)  # lazily: the loop often stops early
    for s in itertools.chain((0,), (m.end() for m in ends)):
        hi = s + max_chars - 2
        while added < len(hits) and hits[added][0] <= hi:  # occurrences entering the window
            k = hits[added][1]
            distinct += counts[k] == 0
            counts[k] += 1
            added += 1
        while dropped < added and hits[dropped][0] < s:  # and leaving it
            k = hits[dropped][1]
            counts[k] -= 1
            distinct -= counts[k] == 0
            dropped += 1
        if distinct > best:
            best, start = distinct, s
            if best == present:
                break  # no later window can hold more; ties go to the earliest
    return start
