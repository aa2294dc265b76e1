"""What a question becomes before it is kept: a normalized form, a keyed hash of it, and keyed
hashes of its analysed terms (for near-duplicates); the recorder keys it masked (`gaps.mask`).

question key: the question as the index analysed it. When the index's relevance finds content
words in it (`indexes.store.KnowledgeIndex.question`: its jieba words without stop words and
question words, a made-up word split into the dictionary's), the key is
HMAC-SHA-256(server key, 'w:' + those words sorted, joined by U+001F), so word order, question
words and particles do not split a group: 年假怎么休 and 年假要怎么休 are one question. Otherwise
(no index at hand, or a question of stop words only: 怎么办) it is
HMAC-SHA-256(server key, 'q:' + normalized form), the rule before the index's analysis was used;
first 16 bytes as hex either way. Questions kept under a 'q:' key stay until they expire
(keep_days); they share their term hashes with the same question keyed by words, so the
near-duplicate join puts both in one group, whose id stays the older key (groups module doc).
normalized form: `indexes.analysis.normalize` (NFKC, case folding, traditional → simplified,
the index's own rule) with every character that is neither a letter nor a digit removed, so
"年假怎么算？" and "年假 怎么算" are one question.
Keyed (not a bare hash): without the server key nobody can test a dictionary of likely questions
against what is kept.
term hashes: HMAC-SHA-256(server key, 't:' + term), first 4 bytes as hex, of the analysed terms
of the question (`indexes.analysis.query_terms`: words, Latin words, bigrams: the same analysis
the index searches with), at most MAX_TERMS. Two questions whose term-hash sets have a Jaccard
similarity of at least NEAR (0.5) are near-duplicates (`gateway.console.gaps.groups`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

from indexes.analysis import normalize, query_terms

MAX_TERMS = 32


@dataclass(frozen=True, slots=True)
class QuestionKey:
    """key: 32 hex characters; terms: sorted term hashes (8 hex characters each)."""

    key: str
    terms: tuple[str, ...]


def normalized(query: str) -> str:
    """The normalized form of a question (module doc): letters and digits only, folded."""
    return "".join(ch for ch in normalize(query) if ch.isalnum())


def question_key(secret: bytes, query: str, words: Sequence[str] = ()) -> QuestionKey:
    """The `QuestionKey` of question text under the server key `secret` (module doc). The recorder
    passes the text masked (`gateway.console.gaps.mask`), as it is kept: a try of the kept text
    keys the same, and two askers' phone numbers do not split one question.
    words: the question's content words as the index analysed it (empty: not known)."""
    keyed = b"w:" + "\x1f".join(sorted(set(words))).encode("utf-8") if words else \
        b"q:" + normalized(query).encode("utf-8")
    digest = hmac.new(secret, keyed, hashlib.sha256).hexdigest()[:32]
    t = query_terms(query)
    terms = list(dict.fromkeys((*t.words, *t.latin, *t.bigrams)))[:MAX_TERMS]
    hashed = sorted({hmac.new(secret, b"t:" + w.encode("utf-8"), hashlib.sha256).hexdigest()[:8] for w in terms})
    return QuestionKey(digest, tuple(hashed))
