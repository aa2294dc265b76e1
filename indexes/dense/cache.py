"""Embedding cache: vectors of passages kept by content hash, so that re-runs, upserts and
rebuilds never embed the same text twice.

Rationale: docs/design-notes.md, "indexes/dense/cache.py".
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

__all__ = ["EmbeddingCache", "text_key"]

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")
BUSY_TIMEOUT_SECONDS = 30.0


def text_key(text: str) -> bytes:
    """SHA-256 (32 bytes) of `text` encoded as UTF-8: the cache key of one passage."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Passage vectors by text hash, for one vector space (`fingerprint`).

    path: the SQLite file (created with its folder). dim: vector length; a stored vector
    of another length is treated as absent. Thread-safe (one connection, one lock).
    Raises sqlite3.Error only for an unusable file (permissions, corruption).
    """

    def __init__(self, path: Path, dim: int | None = None) -> None:
        self.path = Path(path)
        self.dim = dim
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_SECONDS, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS embeddings (key BLOB PRIMARY KEY, vector BLOB NOT NULL)")
        self._db.commit()

    @staticmethod
    def path_for(folder: Path, fingerprint: str) -> Path:
        """The cache file of vector space `fingerprint` under `folder` (a readable slug plus
        a short hash, so two fingerprints never share a file)."""
        digest = hashlib.sha256(fingerprint.encode("utf-8")).hexdigest()[:12]
        slug = _SLUG.sub("-", fingerprint).strip("-")[:60]
        return Path(folder) / f"{slug}-{digest}.sqlite3"

    def get_many(self, keys: Sequence[bytes]) -> dict[bytes, npt.NDArray[np.float32]]:
        """The cached vectors among `keys` (absent keys are left out)."""
        out: dict[bytes, npt.NDArray[np.float32]] = {}
        with self._lock:
            for start in range(0, len(keys), 500):  # SQLite's bound-parameter limit
                part = list(keys[start:start + 500])
                marks = ",".join("?" * len(part))
                rows = self._db.execute(f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", part)
                for key, blob in rows:
                    vec = np.frombuffer(blob, dtype="<f4")
                    if self.dim is None or vec.shape[0] == self.dim:
                        out[bytes(key)] = vec
        return out

    def put_many(self, items: Sequence[tuple[bytes, npt.NDArray[np.float32]]]) -> None:
        """Store (key, vector) pairs in one transaction (an existing key is replaced)."""
        if not items:
            return
        rows = [(k, np.asarray(v, dtype="<f4").tobytes()) for k, v in items]
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO embeddings (key, vector) VALUES (?, ?)", rows)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
