"""`[gaps]`: knowledge gaps and hit statistics (gateway/console/gaps; GapsConfig documents each key).

Rationale: docs/design-notes.md, "gateway/core/config/gaps.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from gateway.core.config.fields import read_secret, secret_ref, shorter_than
from gateway.core.config.owners import DEFAULT_GAP_THRESHOLD, GapsConfig
from gateway.core.errors import ConfigError
from gateway.core.validate import Fields

MIN_KEY_CHARS = 16  # an HMAC key shorter than this lets a dictionary of questions be tested offline


def parse_gaps(t: Fields, base_dir: Path, env: Mapping[str, str]) -> GapsConfig:
    """The [gaps] table → GapsConfig. Raises ConfigError naming the key."""
    t.only({"threshold", "thresholds", "keep_days", "max_questions", "query_retention_seconds", "max_examples",
            "key_env", "key_file", "flush_seconds"})
    thresholds: dict[str, float] = {}
    table = t.table("thresholds")
    for route in table.data:
        thresholds[route] = table.number(route, DEFAULT_GAP_THRESHOLD, lo=0.0, hi=1.0)
    key = None
    ref = secret_ref(t, "key_env", "key_file", required=False)
    if ref is not None:
        key = read_secret(ref[0], ref[1], base_dir, env)
        if shorter_than(key, MIN_KEY_CHARS):
            raise ConfigError(ref[1], f"is shorter than {MIN_KEY_CHARS} characters")
    return GapsConfig(
        threshold=t.number("threshold", DEFAULT_GAP_THRESHOLD, lo=0.0, hi=1.0),
        thresholds=thresholds,
        keep_days=t.integer("keep_days", 30, lo=1, hi=366),
        max_questions=t.integer("max_questions", 5000, lo=10, hi=100_000),
        query_retention_seconds=t.integer("query_retention_seconds", 7 * 24 * 3600, lo=60, hi=366 * 24 * 3600),
        max_examples=t.integer("max_examples", 5, lo=1, hi=50),
        key=key,
        flush_seconds=t.number("flush_seconds", 2.0, lo=0.05, hi=300.0),
    )
