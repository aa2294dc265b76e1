"""gateway/ops/check_steps.py: check-config's next step for each state of a routed index."""

from __future__ import annotations

import pytest

from gateway.ops.check_steps import next_step
from indexes.errors import IndexCorruptError, IndexLockedError, IndexNotFoundError, IndexStoreError, SchemaVersionError

CFG = "/etc/kb gate/gateway.toml"  # a space: the command must stay one argument when pasted
QUOTED = "'/etc/kb gate/gateway.toml'"


def test_missing_gets_the_index_add_command() -> None:
    line = next_step(IndexNotFoundError("kb", "/srv/idx/kb"), CFG)
    assert line.startswith(f"index kb is not built yet: build it with `kbgate index add --config {QUOTED} --index kb "
                           "PATH...`")


@pytest.mark.parametrize(("problem", "words"), [
    (IndexCorruptError("kb", "/srv/idx/kb", "meta.json: EOF"), "Restore the folder from a copy, or rebuild it"),
    (SchemaVersionError("kb", "/srv/idx/kb", 1, 2), "rebuild it: delete the folder /srv/idx/kb"),
])
def test_a_rebuild_names_the_config_it_was_checked_with(problem: IndexStoreError, words: str) -> None:
    line = next_step(problem, CFG)
    assert words in line and f"`kbgate index add --config {QUOTED} --index kb PATH...`" in line
    assert "--config FILE" not in line


def test_locked_says_to_wait() -> None:
    assert "wait for it to finish and retry" in next_step(IndexLockedError("kb", "/srv/idx/kb"), CFG)
