"""The answer cache in the corpus phases: switched on and off in a running server, its lookups counted.

Rationale: docs/design-notes.md, "bench/answercache.py".
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gateway.ops.processes import Server

__all__ = ["CacheSwitch"]

_KEY = re.compile(r"(?m)^answer_cache_entries = \d+$")
_RELOADED = '"config reloaded"'


class CacheSwitch:
    """The answer cache of `server` (started from `config` with `entries` > 0 or 0 written
    by `bench.stack.write_routes_config`); `workers`: how many reload lines one switch waits for."""

    def __init__(self, server: Server, config: Path, workers: int, entries: int) -> None:
        self.server, self.config, self.workers = server, config, workers
        self.entries = self.configured = entries

    def switch(self, entries: int, timeout: float = 30.0) -> None:
        """Rewrite the config with `entries` and wait until every worker reloaded it. Raises
        RuntimeError when they do not within `timeout` seconds."""
        if entries == self.entries:
            return
        seen = self.server.logs().count(_RELOADED)
        text = self.config.read_text(encoding="utf-8")
        if not _KEY.search(text):
            raise RuntimeError(f"{self.config} has no answer_cache_entries line to switch")
        self.config.write_text(_KEY.sub(f"answer_cache_entries = {entries}", text), encoding="utf-8")
        deadline = time.monotonic() + timeout
        while self.server.logs().count(_RELOADED) < seen + self.workers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not reload {self.config} within {timeout:g} s")
            time.sleep(0.1)
        self.entries = entries

    def lookups(self, index: str) -> dict[str, float]:
        """{'hit': n, 'miss': n} of `index` so far, all workers together."""
        text = httpx.get(f"{self.server.base}/metrics", timeout=10.0).text
        out = {"hit": 0.0, "miss": 0.0}
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                if s.name == "kbgate_answer_cache_lookups_total" and s.labels.get("index") == index:
                    out[s.labels["outcome"]] = out.get(s.labels["outcome"], 0.0) + s.value
        return out

    def measured(self, index: str, run: Callable[[], dict[str, Any]],
                 warm: Callable[[], object] | None = None) -> dict[str, Any]:
        """`warm()` (unmeasured: a warm-up may send its bodies more than once), then `run()`'s
        row plus cache ('on' | 'off'), cache_entries, cache_lookups and cache_hit_share (hits ÷
        lookups during `run`; None when the cache was off)."""
        if warm is not None:
            warm()
        before = self.lookups(index)
        r = run()
        after = self.lookups(index)
        hits, misses = after["hit"] - before["hit"], after["miss"] - before["miss"]
        r["cache"] = "on" if self.entries else "off"
        r["cache_entries"] = self.entries
        r["cache_hit_share"] = hits / (hits + misses) if self.entries and hits + misses else None
        r["cache_lookups"] = int(hits + misses)
        return r
