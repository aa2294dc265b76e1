"""A route's retrieval dials (`indexes.types.Dials`), on `[[tenants.*.routes]]` and `[agent.routes.NAME]`.

Rationale: docs/design-notes.md, "gateway/core/config/dials.py".
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from gateway.core.config.model import SUMMARY_CHARS_MAX, SUMMARY_CHARS_MIN, SearchConfig
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields
from indexes.dense.config import DenseChoices, DenseConfig
from indexes.neighbours import MAX_NEIGHBOURS
from indexes.rerank.config import RerankConfig
from indexes.types import NO_DIALS, Dials

__all__ = ["DIAL_KEYS", "check_dials", "floor_of", "parse_dials"]

DIAL_KEYS = ("dense_share", "candidates", "rerank", "rerank_threshold", "neighbours", "summary_chars")


def floor_of(route_floor: float | None, search: SearchConfig) -> float:
    """The relevance floor of a route (0..1): its own when set, else search.relevance_floor.
    Hits under it are dropped, never replaced (Agent知识按需搜索与读取 §独立搜索: the route threshold is not
    lowered to fill a list)."""
    return search.relevance_floor if route_floor is None else route_floor


def parse_dials(r: Fields, max_candidates: int) -> Dials:
    """The dials of route table `r` (NO_DIALS when it sets none). max_candidates:
    search.max_chunks_per_query (a search never takes more chunks). Raises ConfigError naming
    the key: a number out of range, rerank_threshold with rerank = false."""
    if not any(k in r for k in DIAL_KEYS):
        return NO_DIALS
    share = r.number("dense_share", 0.0, lo=0.0, hi=1.0) if "dense_share" in r else None
    candidates = r.integer("candidates", 1, lo=1, hi=max_candidates) if "candidates" in r else None
    rerank = r.boolean("rerank", True) if "rerank" in r else None
    threshold = r.number("rerank_threshold", 0.0, lo=0.0, hi=1.0) if "rerank_threshold" in r else None
    if threshold is not None and rerank is False:
        raise ConfigError(r.key("rerank_threshold"), "is set, but rerank = false turns the reranker off for this "
                          "route: remove one of them")
    summary = r.integer("summary_chars", SUMMARY_CHARS_MIN, lo=SUMMARY_CHARS_MIN, hi=SUMMARY_CHARS_MAX) \
        if "summary_chars" in r else None
    return Dials(share, candidates, rerank, threshold, r.integer("neighbours", 0, lo=0, hi=MAX_NEIGHBOURS), summary)


def check_dials(routes: Iterator[tuple[str, str, Dials]], dense: Mapping[str, DenseConfig],
                rerank: Mapping[str, RerankConfig]) -> None:
    """Refuse a dial the route's index cannot honour. routes: (the route's key, e.g.
    'tenants.acme.routes[0]', its index, its dials); dense / rerank: the config's hybrid and rerank
    settings by index (`DenseChoices`: an index the config leaves to the default may be hybrid,
    decided on disk, so only `dense = "none"` makes it lexical here). Raises ConfigError naming
    the dial's key."""
    choices = DenseChoices.of(dense)
    for at, index, d in routes:
        hybrid = index in choices or (index not in choices.lexical and choices.default is not None)
        reranked = index in rerank
        if d.dense_share is not None and not hybrid:
            raise ConfigError(f"{at}.dense_share", f"is set, but index {index!r} is lexical ([indexes.{index}] dense "
                              "= \"none\"): there is no fusion to share; remove it or make the index hybrid")
        if d.candidates is not None and not hybrid and not reranked:
            raise ConfigError(f"{at}.candidates", f"is set, but index {index!r} has neither a fusion (it is lexical) "
                              f"nor a rerank stage ([indexes.{index}.rerank]) to take candidates")
        for key, on in (("rerank", d.rerank is True), ("rerank_threshold", d.rerank_threshold is not None)):
            if on and not reranked:
                raise ConfigError(f"{at}.{key}", f"is set, but index {index!r} has no rerank stage "
                                  f"([indexes.{index}.rerank]); remove it or configure one")
