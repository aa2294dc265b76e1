"""What a question becomes before it is kept: a normalized form, a keyed hash of it, and keyed
hashes of its analysed terms (for near-duplicates); the recorder keys it masked (`gaps.mask`).

Rationale: docs/design-notes.md, "gateway/console/gaps/keys.py".
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
