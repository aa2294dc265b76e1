"""The root of a run's tree documents: the folder their paths and ids are relative to
(`indexes.ingest`, document identity).

Rationale: docs/design-notes.md, "indexes/roots.py".
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .schema import SIDECAR, check_sidecar, write_sidecar

__all__ = ["RootChoice", "choose_root", "read_roots", "remember_root"]


def read_roots(folder: Path) -> dict[str, str]:
    """dataset ('' for none) → the absolute folder its tree documents' paths were last made
    relative to, from the sidecar of the index at `folder`; {} when none is recorded (or
    there is no index there yet)."""
    try:
        payload = json.loads((folder / SIDECAR).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    roots = payload.get("roots") if isinstance(payload, dict) else None
    if not isinstance(roots, dict):
        return {}
    return {str(k): v for k, v in roots.items() if isinstance(v, str)}


def remember_root(folder: Path, name: str, dataset: str, root: str) -> None:
    """Record `root` (an absolute folder) for `dataset` in the sidecar of index `name` at
    `folder`, beside its other keys (written atomically). For the one writer only. Raises
    SchemaVersionError for an index of another schema version."""
    payload = check_sidecar(folder, name)
    payload.pop("schema_version", None)
    payload["roots"] = {**read_roots(folder), dataset: root}
    write_sidecar(folder, payload)


@dataclass(frozen=True, slots=True)
class RootChoice:
    """What `choose_root` decided for one run.

    root: the absolute folder tree paths are relative to, or None (several PATHs and no root:
    each folder is its own root). problem: why the run is refused (exit 2), or None.
    note: a line for the operator, or None. record: the root to record for the dataset after
    the run, or None (recorded only when the run committed a document: `kbgate index add`).
    """

    root: str | None
    problem: str | None = None
    note: str | None = None
    record: str | None = None


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def choose_root(given: str | None, paths: Sequence[str], recorded: str | None, *,
                command: str = "kbgate index add", delete_missing: bool = False) -> RootChoice:
    """The root of a run (`RootChoice`). Never raises.

    given: `--root` or None; paths: the PATHs as given; recorded: the root the index recorded
    for the run's dataset, or None; command: the `kbgate index add ...` words that name this
    index and dataset (for the commands a refusal prints); delete_missing: the run deletes
    what it does not see. The rule (docs/indexes.md, "Document identity"):
    - `--root` holds every PATH (symlinks resolved) or the run is refused. It is recorded when
      nothing is recorded, when the recorded root is not a folder here (a moved checkout), or
      when the run re-keys the whole dataset (`--root X --delete-missing X`); otherwise it is
      used for this run only and the recorded root stays (a note says so).
    - Without `--root`: a recorded root that holds every PATH is the root; a PATH outside it
      (a sibling, or a folder holding it) is refused with the commands to run; a recorded
      root that is not a folder here is refused (name the new place with `--root`).
    - Nothing recorded: the one folder given is the root (recorded); several PATHs or a file:
      None.
    """
    real = [os.path.realpath(p) for p in paths]
    here = recorded is not None and os.path.isdir(recorded)
    if given is not None:
        top = os.path.realpath(given)
        if not os.path.isdir(top):
            return RootChoice(None, f"--root {given} is not a folder")
        outside = [p for p, r in zip(paths, real, strict=True) if not _within(r, top)]
        if outside:
            verb = "is" if len(outside) == 1 else "are"
            return RootChoice(None, f"{', '.join(outside)} {verb} not inside --root {given}")
        if recorded is None or recorded == top:
            return RootChoice(top, record=top)
        if not here:
            return RootChoice(top, note=f"the root {recorded} recorded for this dataset is not a folder here: "
                                        f"{top} is recorded in its place", record=top)
        if delete_missing and all(r == top for r in real):
            return RootChoice(top, note=f"the recorded root moves from {recorded} to {top}: each document is "
                                        f"indexed under its id relative to {top} and --delete-missing deletes "
                                        "the ids relative to the old root", record=top)
        return RootChoice(top, note=f"ids are relative to --root {top} for this run only; the root recorded for "
                                    f"this dataset stays {recorded} (a file indexed under both is two documents)")
    if recorded is not None and not here:
        return RootChoice(None, f"the root {recorded} this index recorded for the dataset is not a folder on this "
                                "machine: name where that folder is now with --root (it is recorded in its place): "
                                f"{command} --root DIR {' '.join(map(shlex.quote, paths))}")
    if recorded is not None:
        aside = [(p, r) for p, r in zip(paths, real, strict=True) if not _within(r, recorded)]
        if not aside:
            return RootChoice(recorded, record=recorded)
        p, r = aside[0]
        if _within(recorded, r):
            return RootChoice(None, (
                f"{p} holds {recorded}, the root this index recorded for the dataset (document ids are relative "
                f"to it): indexing {p} would give the documents already indexed new ids. To make {p} the root "
                f"and re-key the dataset: {command} --root {shlex.quote(p)} --delete-missing {shlex.quote(p)}; "
                f"or index only what lies inside {recorded}"))
        return RootChoice(None, (
            f"{p} is outside {recorded}, the root this index recorded for the dataset (document ids are relative "
            f"to it). Index it under its own dataset (--dataset NAME), or choose its root for this run only: "
            f"{command} --root {shlex.quote(p) if os.path.isdir(r) else 'DIR'} {shlex.quote(p)}"))
    if len(paths) == 1 and os.path.isdir(real[0]):
        return RootChoice(real[0], record=real[0])
    return RootChoice(None)
