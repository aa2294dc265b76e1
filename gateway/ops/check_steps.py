"""What `kbgate check-config` prints under a routed index that would not open: the next step
for each state, with the config file the operator ran it on filled in.

Rationale: docs/design-notes.md, "gateway/ops/check_steps.py".
"""

from __future__ import annotations

import shlex
from pathlib import Path

from gateway.core.config import Config
from indexes.dense.config import DenseChoices
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


def inert_dials(config: Config, root: Path) -> list[str]:
    """One warning line per route dial its index cannot honour as it stands on disk: a
    `dense_share` or `candidates` (without a rerank stage) on an index the config leaves to the
    default but built lexical before, so served without vectors (`DenseChoices.unembedded`);
    the config load refuses the other cases (gateway.core.config.dials)."""
    choices = DenseChoices.of(config.dense)
    routes = [(f"tenants.{t.name}.routes[{i}]", r.index, r.dials) for t in config.tenants.values()
              for i, r in enumerate(t.routes)]
    routes += [(f"agent.routes.{r.name}", r.index, r.dials) for r in config.agent.routes.values()]
    out = []
    for at, index, d in routes:
        if not choices.unembedded(index, root / index):
            continue
        for key in ("dense_share", *(() if index in config.rerank else ("candidates",))):
            if getattr(d, key) is not None:
                out.append(f"warning: {at}.{key} is inert: index {index} is served lexically until it has vectors "
                           f"(kbgate index embed)")
    return out
