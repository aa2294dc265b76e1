"""The gap and hit recorder: an observer of `SearchAnswered` (gateway.core.events) that keeps,
off the request path, what callers asked that the knowledge could not answer and which
documents were served.

Rationale: docs/design-notes.md, "gateway/console/gaps/record.py".
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from anyio import to_thread
from redis.exceptions import RedisError

from gateway.console.gaps.flushing import FlushLoop
from gateway.console.gaps.groups import Question
from gateway.console.gaps.keys import question_key
from gateway.console.gaps.mask import mask
from gateway.console.gaps.owners import route_floor
from gateway.console.gaps.states import MemoryStates, RedisStates, group_of
from gateway.console.gaps.store import CHUNK, TOP, Example, GapStore, Served, day_of
from gateway.console.scores import cut
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.events import Asker, SearchAnswered

log = logging.getLogger("kbgate.gaps")

MAX_PENDING = 20_000  # questions waiting for the flush before new ones are dropped
MAX_BEST = 3  # near-miss hits kept per question
MAX_WORDS = 12  # unmatched words kept per near miss
MAX_EXPLAINED = 20  # no-hit questions per flush whose nearest pages are looked up (a search each)
OUTCOMES = ("answered", "no_answer", "low_score")

Pending = tuple[SearchAnswered, float, bool, str, float]  # (event, unix s, keep its text, outcome, threshold)


def verdict(relevances: Iterable[float], threshold: float) -> str:
    """The gap rule on a question's hits' relevances (0..1): 'no_answer' (no hit), 'low_score'
    (the best is under `threshold`) or 'answered'."""
    best = max(relevances, default=None)
    if best is None:
        return "no_answer"
    return "low_score" if best < threshold else "answered"


def classify(e: SearchAnswered, threshold: float) -> str:
    """`verdict` of a published question's hits."""
    return verdict((h.relevance for h in e.hits), threshold)


def gap_view(config: Config, routes: tuple[str, ...], relevances: Iterable[float]) -> dict[str, object]:
    """What a try shows of the gap rule (`gateway.core.explain.SearchTrace.gap`): {"threshold": the
    routes' gap threshold (`GapsConfig.threshold_of`), "gap": bool, "reason": `verdict`}."""
    threshold = config.gaps.threshold_of(routes)
    reason = verdict(relevances, threshold)
    return {"threshold": threshold, "gap": reason != "answered", "reason": reason}


def route_label(e: SearchAnswered) -> str:
    """The routes of a question as one label: configured route ids joined by ','."""
    return ",".join(e.asker.routes) or "-"


Words = Callable[[str, str], Sequence[str]]
"""(index name, raw question) → the question's content words as that index analyses them."""
Nearest = Callable[[str, str, int], list[dict[str, Any]]]
"""(index name, masked question, limit) → the index's nearest pages for it, unscoped and with no
floor: {index, doc_id, title, path, relevance, unmatched} each (`gaps.nearest_pages`)."""
Missing = Callable[[str, str, str], Sequence[str]]
"""(index name, document id, masked question) → the question's content words that document
(title and text) does not hold, as the index analyses them (`gateway.core.explain.analysis_of`)."""


class GapRecorder(FlushLoop["Pending"]):
    """config: () -> the current Config (read per event: a reload applies at once); now: the
    clock (unix s); store: where batches go; count(route, outcome): the Prometheus counter;
    words: the index's analysis of a question (`Words`, the question key's; run in the flush's
    worker thread; what it raises counts as no words); states: the groups' states (filed,
    resolved, ignored: `gateway.console.gaps.states`), this process's memory when None; missing:
    a near miss's unmatched words (`Missing`, in the flush's thread; kept only with the text)."""

    def __init__(self, config: Callable[[], Config], now: Callable[[], float], store: GapStore,
                 count: Callable[[str, str], None] | None = None, words: Words | None = None,
                 states: MemoryStates | RedisStates | None = None, missing: Missing | None = None,
                 nearest: Nearest | None = None) -> None:
        self._words = words
        self._missing = missing
        self._nearest = nearest
        super().__init__(config, now, log, MAX_PENDING)
        self.states = states if states is not None else MemoryStates()
        self.store = store
        self._count = count or (lambda route, outcome: None)
        key = config().gaps.key
        self._key: bytes | None = key.reveal().encode("utf-8") if key is not None else None
        self.dropped = 0

    def observe(self, e: SearchAnswered) -> None:
        """Classify, count and queue one question (module doc). Never blocks, never raises."""
        if e.asker.probe or (e.failed and not e.hits):
            return
        cfg = self._config()
        threshold = cfg.gaps.threshold_of(e.asker.routes)
        outcome = classify(e, threshold)
        self._count(route_label(e), outcome)
        if not self._queue((e, self._now(), cfg.gaps.keep_text, outcome, threshold)):
            self.dropped += 1
            self._warn("gaps record: flush behind, question dropped")

    async def flush(self) -> None:
        """Write everything queued so far (one batch). Never raises."""
        if not self._pending:
            return
        try:
            if self._key is None:
                self._key = await self.store.key()
        except (RedisError, OSError, TimeoutError):
            self._warn("gaps record: the server key cannot be read from Redis yet; questions wait")
            return
        batch = self._take()
        cfg = self._config()
        questions, examples, served = await to_thread.run_sync(
            _aggregate, batch, self._key, self._analysed, self._unmatched,
            lambda e: self._near(e, route_floor(cfg, e.asker.routes)))
        try:
            protected = frozenset(group_of(k) for k in await self.states.all())
        except DependencyUnavailable:
            protected = frozenset()  # the states cannot be read: plain least-recently-seen eviction
        try:
            await self.store.apply(questions, examples, served, cfg.gaps, self._now(), protected)
        except (RedisError, OSError, TimeoutError) as exc:
            self.dropped += len(batch)
            self._warn(f"gaps record: write failed ({type(exc).__name__}), {len(batch)} question(s) dropped")

    async def secret(self) -> bytes:
        """The server key questions are hashed with (`gateway.console.gaps.keys`). Raises
        RedisError / OSError / TimeoutError when it must be read from Redis and cannot."""
        if self._key is None:
            self._key = await self.store.key()
        return self._key

    def words_of(self, index: str, query: str) -> Sequence[str]:
        """The question key's words for `query` on `index` (() when unknown): CPU, in a thread."""
        return self._analysed(SearchAnswered(Asker("console", "", ()), query, (index,), ()))

    def _analysed(self, e: SearchAnswered) -> Sequence[str]:
        """The content words of `e`'s question on the first index it searched; () when unknown."""
        if self._words is None or not e.indexes:
            return ()
        try:
            return self._words(e.indexes[0], e.query)
        except Exception:  # an index closed or failing must not lose the batch  # noqa: BLE001
            return ()

    def _unmatched(self, index: str, doc_id: str, masked: str) -> list[str]:
        """`Missing` of a near miss; [] when unknown (no analysis at hand, an index failing)."""
        if self._missing is None:
            return []
        try:
            return list(self._missing(index, doc_id, masked))
        except Exception:  # an index closed or failing must not lose the batch  # noqa: BLE001
            return []

    def _near(self, e: SearchAnswered, floor: float) -> list[dict[str, Any]]:
        """A no-hit question's nearest pages (`Nearest`, on its first index), each with why the
        caller did not get it: 'floor' (its relevance under the route's floor) or 'scope' (over
        the floor: outside the caller's scope or conditions); [] when unknown."""
        if self._nearest is None or not e.indexes:
            return []
        try:
            pages = self._nearest(e.indexes[0], e.query, MAX_BEST)
        except Exception:  # an index closed or failing must not lose the batch  # noqa: BLE001
            return []
        return [{**p, "unmatched": list(p.get("unmatched", ()))[:MAX_WORDS], "floor": floor,
                 "why": "floor" if p.get("relevance", 0) < floor else "scope"} for p in pages[:MAX_BEST]]

    async def close(self) -> None:
        """Flush what is queued, then close the store."""
        await self.flush()
        await self.store.close()
        if isinstance(self.states, RedisStates):
            await self.states.close()


def _aggregate(batch: list[Pending], key: bytes, words: Callable[[SearchAnswered], Sequence[str]],
               unmatched: Callable[[str, str, str], list[str]] | None = None,
               near: Callable[[SearchAnswered], list[dict[str, Any]]] | None = None,
               ) -> tuple[list[Question], list[Example], Served]:
    """Queued questions → (one delta per question key, texts to keep, served counts: every hit
    under (index, day), the top answer (rank 1) also under (index, day, TOP), and by chunk
    ('{doc_id}#{n}') under (index, day, CHUNK)). A near miss (best hit) carries the threshold it
    was judged under and, with the text kept, the question's words it does not hold ('unmatched',
    from the masked text). A no-hit question (the first MAX_EXPLAINED of a batch) gets its nearest
    pages and why it did not get them (`near`)."""
    questions: dict[str, Question] = {}
    examples: list[Example] = []
    served: Served = {}
    explained = 0
    for e, ts, keep_text, outcome, threshold in batch:
        day = day_of(ts)
        for rank, h in enumerate(e.hits, 1):
            served.setdefault((h.index, day), Counter())[h.doc_id] += 1
            if rank == 1:
                served.setdefault((h.index, day, TOP), Counter())[h.doc_id] += 1
            if h.chunk >= 0:
                served.setdefault((h.index, day, CHUNK), Counter())[f"{h.doc_id}#{h.chunk}"] += 1
        if outcome == "answered":
            continue
        masked = mask(e.query)  # keyed as kept: the same question with another phone number is one
        qk = question_key(key, masked, words(replace(e, query=masked)))
        q = questions.get(qk.key)
        if q is None:
            q = questions[qk.key] = Question(qk.key, qk.terms, first=ts)
        q.count += 1
        q.no_answer += outcome == "no_answer"
        q.low_score += outcome == "low_score"
        q.first, q.last = min(q.first, ts), max(q.last, ts)
        q.days[day] += 1
        q.callers[f"{e.asker.wing}:{e.asker.caller}"] += 1
        q.routes[route_label(e)] += 1
        if e.hits:
            q.best = [{"index": h.index, "doc_id": h.doc_id, "title": h.title, "path": h.path,
                       "relevance": cut(h.relevance, 6), "revision": h.revision, "threshold": threshold}
                      for h in e.hits[:MAX_BEST]]
            if keep_text and unmatched is not None:
                for b in q.best:
                    b["unmatched"] = unmatched(b["index"], b["doc_id"], masked)[:MAX_WORDS]
        if outcome == "no_answer" and near is not None and not q.near and explained < MAX_EXPLAINED:
            explained += 1
            q.near = [p if keep_text else {k: v for k, v in p.items() if k != "unmatched"}
                      for p in near(replace(e, query=masked))]
        if keep_text:
            examples.append((qk.key, ts, masked))
    return list(questions.values()), examples, served
