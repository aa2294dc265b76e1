"""What `kbgate check-config` prints under a routed index that would not open: the next step
for each state, with the config file the operator ran it on filled in.

    [MISSING]                          → the `kbgate index add` command that builds it
    [DAMAGED]                          → restore the folder, or delete it and rebuild (indexes.errors)
    [BUILT BY ANOTHER SCHEMA VERSION]  → delete the folder and rebuild (indexes.errors)
    [LOCKED BY A WRITER]               → wait for the writer (indexes.errors)
    [READ-ONLY], [UNREADABLE]          → a writable TMPDIR, read access for the server's user
                                         (a read-only folder alone opens: indexes.readonly)
"""

from __future__ import annotations

import shlex

from indexes.errors import IndexNotFoundError, IndexStoreError


def next_step(problem: IndexStoreError, config: str) -> str:
    """One line for an index `IndexStore.check` refused: what is wrong and what to run.

    problem: the refusal (its `name` is the index). config: the --config path as given,
    shell-quoted into the command. A missing index gets the `kbgate index add` command that
    builds it; the other states keep the indexes.errors message, whose `--config FILE` is
    replaced by `config`. Never raises.
    """
    file = shlex.quote(config)
    if isinstance(problem, IndexNotFoundError):
        return (f"index {problem.name} is not built yet: build it with `kbgate index add --config {file} "
                f"--index {shlex.quote(problem.name)} PATH...` (PATH: its documents' folders or files)")
    return str(problem).replace("--config FILE", f"--config {file}")
