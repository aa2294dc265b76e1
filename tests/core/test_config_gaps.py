"""gateway/core/config/gaps: [gaps] keep_text, keep_days and the text's retention, each bad value
refused naming its key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config.owners import GapsConfig
from gateway.core.errors import ConfigError
from tests.support.configs import config, parse

DAY = 86400


def _gaps(tmp_path: Path, **gaps: Any) -> GapsConfig:
    return parse({**config(tmp_path), "gaps": gaps}, tmp_path).gaps


def test_question_text_is_kept_by_default_for_keep_days(tmp_path: Path) -> None:
    g = _gaps(tmp_path)
    assert g.keep_text is True and g.keep_days == 30 and g.text_seconds == 30 * DAY


def test_one_line_turns_the_text_off(tmp_path: Path) -> None:
    assert _gaps(tmp_path, keep_text=False).keep_text is False


def test_the_text_lives_query_retention_seconds_but_never_past_keep_days(tmp_path: Path) -> None:
    assert _gaps(tmp_path, query_retention_seconds=3600).text_seconds == 3600
    assert _gaps(tmp_path, keep_days=2, query_retention_seconds=30 * DAY).text_seconds == 2 * DAY


@pytest.mark.parametrize(("key", "value"), [
    ("keep_days", 0), ("keep_days", 367), ("keep_days", "30"), ("keep_days", True),
    ("keep_text", "no"), ("keep_text", 0), ("query_retention_seconds", 1),
])
def test_a_bad_value_is_refused_naming_its_key(tmp_path: Path, key: str, value: Any) -> None:
    with pytest.raises(ConfigError) as err:
        _gaps(tmp_path, **{key: value})
    assert f"gaps.{key}" in str(err.value)
