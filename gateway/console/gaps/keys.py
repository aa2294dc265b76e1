"""What a question becomes before it is kept: a normalized form, a keyed hash of it, and keyed
hashes of its analysed terms (for near-duplicates), so nothing of the text is kept by default.

normalized form: `indexes.analysis.normalize` (NFKC, case folding, traditional → simplified,
the index's own rule) with every character that is neither a letter nor a digit removed, so
"年假怎么算？" and "年假 怎么算" are one question.
question key: HMAC-SHA-256(server key, 'q:' + normalized form), first 16 bytes as hex. Keyed
(not a bare hash): without the server key nobody can test a dictionary of likely questions
against what is kept.
term hashes: HMAC-SHA-256(server key, 't:' + term), first 4 bytes as hex, of the analysed terms
of the question (`indexes.analysis.query_terms`: words, Latin words, bigrams: the same analysis
the index searches with), at most MAX_TERMS. Two questions whose term-hash sets have a Jaccard
similarity of at least NEAR (0.5) are near-duplicates (`gateway.console.gaps.groups`).
"""

from __future__ import annotations

import hashlib
import hmac
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


def question_key(secret: bytes, query: str) -> QuestionKey:
    """The `QuestionKey` of raw question text under the server key `secret` (module doc)."""
    digest = hmac.new(secret, b"q:" + normalized(query).encode("utf-8"), hashlib.sha256).hexdigest()[:32]
    t = query_terms(query)
    terms = list(dict.fromkeys((*t.words, *t.latin, *t.bigrams)))[:MAX_TERMS]
    hashed = sorted({hmac.new(secret, b"t:" + w.encode("utf-8"), hashlib.sha256).hexdigest()[:8] for w in terms})
    return QuestionKey(digest, tuple(hashed))
