"""Opening an index served by an engine other than Tantivy (`indexes.types.MilvusConfig`).

`indexes.store.IndexStore` calls `open_remote` for an index configured with a backend; the
backend's package (and its client library) is imported only then, so a deployment without
`pymilvus` runs every Tantivy index as before, and the gateway never imports a backend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from .errors import IndexStoreError
from .schema import SIDECAR, write_sidecar
from .types import DEFAULT_BOUNDS, MilvusConfig, SearchBounds, ServedIndex

__all__ = ["open_remote"]


def open_remote(name: str, config: MilvusConfig, folder: Path, *, create: bool = False,
                bounds: SearchBounds = DEFAULT_BOUNDS, clock: Callable[[], float] = time.monotonic) -> ServedIndex:
    """The index `name` in its Milvus collection; folder: the local folder of its writer's
    records (and the sidecar `indexes.roots` reads). create: make the collection when absent
    (a writer), else leave it to the first read to find. Raises IndexStoreError when the client
    library is not installed, IndexUnavailableError when Milvus does not answer (create only)."""
    try:
        from .milvus import MilvusIndex
    except ImportError:
        raise IndexStoreError(name, f"Index {name!r} is served by Milvus, but pymilvus is not installed "
                                    "(pip install 'kbgate[milvus]').") from None
    index = MilvusIndex(name, config, folder, bounds=bounds, clock=clock)
    if create:
        index.coll.create()
        folder.mkdir(parents=True, exist_ok=True)
        if not (folder / SIDECAR).is_file():  # the writer's records (`indexes.roots`) live beside it
            write_sidecar(folder, {"served_by": "milvus", "collection": config.collection})
    return index
