"""The root of a run's tree documents: the folder their paths and ids are relative to
(`indexes.ingest`, document identity; issue 16).

`choose_root` is the rule `kbgate index add` applies; `read_roots` / `remember_root` keep the
root of each dataset in the index's sidecar (`indexes.schema.SIDECAR`, key "roots"), so a
later run naming a folder inside it makes the ids of the full run. The recorded root is an
absolute path of the machine that ran the indexer: on another checkout it does not hold the
PATHs given, and the rule falls back to the folder given (with a note saying so).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from .schema import SIDECAR, check_sidecar, write_sidecar

__all__ = ["choose_root", "read_roots", "remember_root"]


def read_roots(folder: Path) -> dict[str, str]:
    """dataset ('' for none) → the absolute folder its tree documents' paths were last made
    relative to, from the sidecar of the index at `folder`; {} when none is recorded."""
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


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def choose_root(given: str | None, paths: Sequence[str],
                recorded: str | None) -> tuple[str | None, str | None, str | None]:
    """(the root of this run, or None; a usage problem, or None; a note for the operator, or None).

    given: `--root` or None; paths: the PATHs as given; recorded: the root the index recorded
    for the run's dataset, or None. The rule: `--root` when given (a folder holding every
    PATH, symlinks resolved); else the recorded root when it still holds every PATH, so a
    sub-folder run makes the ids of the full run; else the one folder given (to be recorded
    after the run); else None (several PATHs and nothing recorded: each folder is its own
    root, as before). Never raises.
    """
    real = [os.path.realpath(p) for p in paths]
    if given is not None:
        top = os.path.realpath(given)
        if not os.path.isdir(top):
            return None, f"--root {given} is not a folder", None
        outside = [p for p, r in zip(paths, real, strict=True) if not _within(r, top)]
        if outside:
            verb = "is" if len(outside) == 1 else "are"
            return None, f"{', '.join(outside)} {verb} not inside --root {given}", None
        return top, None, None
    if recorded is not None and os.path.isdir(recorded) and all(_within(r, recorded) for r in real):
        return recorded, None, None
    if len(paths) == 1 and os.path.isdir(real[0]):
        note = None if recorded is None else (
            f"{paths[0]} is not inside {recorded}, the root this index recorded for the dataset; paths are "
            f"relative to {paths[0]} now (pass --root to choose)")
        return real[0], None, note
    return None, None, None
