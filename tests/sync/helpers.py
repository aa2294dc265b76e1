"""Shared by the sync tests: a config with sync sources, the real CLI, and what an index holds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from indexes.store import IndexStore
from tests.support.harness import kbgate


def write_config(tmp: Path, *sources: str, extra: str = "", lexical: bool = True) -> Path:
    """tmp/c.toml: indexes under tmp/ix, index 'docs' with the given [[indexes.docs.sources]] bodies,
    configured `dense = "none"` unless not `lexical` (these tests are about what sync reads and
    writes; a new index is hybrid by default: tests/sync/test_hybrid.py)."""
    cfg = tmp / "c.toml"
    tables = "".join(f"\n[[indexes.docs.sources]]\n{body.strip()}\n" for body in sources)
    none = '[indexes.docs]\ndense = "none"\n' if lexical else ""
    cfg.write_text(f'[indexes]\ndir = "ix"\n{none}{extra}{tables}', encoding="utf-8")
    return cfg


def sync(cfg: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return kbgate("sync", "--config", str(cfg), "--no-progress", *args, timeout=timeout)


def ids(cfg: Path, index: str = "docs") -> list[str]:
    return sorted(IndexStore(cfg.parent / "ix").open(index).revisions())


def generation(cfg: Path, index: str = "docs") -> int:
    return int(json.loads((cfg.parent / "ix" / index / "meta.json").read_text(encoding="utf-8"))["opstamp"])


def search_ids(cfg: Path, query: str, index: str = "docs") -> list[str]:
    return [h.doc_id for h in IndexStore(cfg.parent / "ix").open(index).search(query, 10)]


def counts(out: str, index: str = "docs") -> tuple[int, int, int, int]:
    """(added, updated, unchanged, deleted) of the run's 'index NAME: ...' line."""
    line = next(ln for ln in out.splitlines() if ln.startswith(f"index {index}: "))
    words = line.split(": ", 1)[1].replace(",", "").split()
    return int(words[0]), int(words[2]), int(words[4]), int(words[6])
