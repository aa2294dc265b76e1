"""Where an index is served from when it is not a Tantivy folder (`[indexes.NAME] backend`).

Plain values: the gateway's config builds them (`gateway.core.config.indexes`) and
`indexes.store.IndexStore` opens the backend they name; nothing here talks to an engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CONSISTENCY_LEVELS", "MilvusConfig"]

CONSISTENCY_LEVELS = ("Strong", "Bounded", "Session", "Eventually")
"""Milvus's consistency levels: what a search sees of writes made just before it
(docs/scaling.md, "3. One index past one machine"): Strong, every write acknowledged before the search; Bounded, up to
a few seconds behind; Session, the writes of the same client; Eventually, whatever has arrived."""


@dataclass(frozen=True, slots=True)
class MilvusConfig:
    """One index served by a Milvus collection.

    uri: 'http://host:port' or 'https://…' of Milvus (Standalone, Distributed, Zilliz Cloud, a
    Milvus Lite server). token: 'user:password' or an API key ('' none); kept out of repr.
    collection: the collection's name (letters, digits, '_'). consistency: one of
    CONSISTENCY_LEVELS, for searches and reads. timeout_seconds: the bound of one search or
    answer as a whole (its few calls share it), and of any other single call to Milvus; past it
    the search fails as unavailable. Raises ValueError.
    """

    uri: str
    collection: str
    token: str = field(default="", repr=False)
    consistency: str = "Strong"
    timeout_seconds: float = 2.0

    def __post_init__(self) -> None:
        if self.consistency not in CONSISTENCY_LEVELS:
            raise ValueError(f"consistency must be one of {', '.join(CONSISTENCY_LEVELS)}")
        if not self.uri.startswith(("http://", "https://")):
            raise ValueError("uri must start with http:// or https://")
        if not 0 < self.timeout_seconds <= 600:
            raise ValueError("timeout_seconds must be in (0, 600]")
