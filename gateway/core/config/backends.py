"""`[indexes.NAME] backend`: an index served by an engine instead of a Tantivy folder.

Rationale: docs/design-notes.md, "gateway/core/config/backends.py".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from gateway.core.config.fields import UnreadSecret, read_secret, secret_ref
from gateway.core.config.indexes import index_tables
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields
from indexes.types import CONSISTENCY_LEVELS, MilvusConfig

__all__ = ["BACKENDS", "MILVUS_KEYS", "parse_backends"]

BACKENDS = ("tantivy", "milvus")
MILVUS_KEYS = ("uri", "token_env", "token_file", "collection", "consistency", "timeout_seconds")
_COLLECTION = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,200}")


def parse_backends(idx: Fields, base_dir: Path, env: Mapping[str, str]) -> dict[str, MilvusConfig]:
    """Index name → its Milvus settings, for every `[indexes.NAME]` with backend = "milvus".
    Raises ConfigError naming the key."""
    out: dict[str, MilvusConfig] = {}
    for name, t in index_tables(idx):
        backend = t.choice("backend", BACKENDS, "tantivy")
        if backend != "milvus":
            for k in MILVUS_KEYS:
                if k in t:
                    t.fail(k, "format", 'applies to backend = "milvus" only')
            continue
        out[name] = _milvus(name, t, base_dir, env)
    return out


def _milvus(name: str, t: Fields, base_dir: Path, env: Mapping[str, str]) -> MilvusConfig:
    uri = t.string("uri")
    if not re.fullmatch(r"https?://[^\s/]+(/\S*)?", uri):
        t.fail("uri", "format", "must be the http:// or https:// address of Milvus, e.g. http://127.0.0.1:19530")
    collection = t.string("collection", re.sub(r"[^A-Za-z0-9_]", "_", name if name[0].isalpha() else f"kb_{name}"))
    if not _COLLECTION.fullmatch(collection):
        t.fail("collection", "format", "must be a Milvus collection name: a letter or '_', then letters, "
                                       "digits and '_', at most 201 characters")
    if "dense" in t and t.data["dense"] != "none":
        t.fail("dense", "format", 'must be "none" on a Milvus index (dense vectors on Milvus are not built yet)')
    ref = secret_ref(t, "token_env", "token_file", required=False)
    token = ""
    if ref is not None:
        secret = read_secret(ref[0], ref[1], base_dir, env)
        token = "" if isinstance(secret, UnreadSecret) else secret.reveal()
    try:
        return MilvusConfig(uri=uri, collection=collection, token=token,
                            consistency=t.choice("consistency", CONSISTENCY_LEVELS, "Strong"),
                            timeout_seconds=t.number("timeout_seconds", 2.0, lo=0.05, hi=600.0))
    except ValueError as exc:  # MilvusConfig's own checks, already made above
        raise ConfigError(t.at, str(exc)) from None
