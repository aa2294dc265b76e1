"""The config the server refused, for every console page: the banner that names its key and
reason until the file loads again.

The workers' `Reloader` (gateway/serve/reload.py) keeps the last refused load of the file
(`last_refusal`) and whether the file on disk is what this worker serves (`refused`); before
this banner only the server log and /readyz said so, while every page looked fine.
`rejected(request)` → {"key", "problem", "file", "at", "trigger"} or None.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from starlette.requests import Request


def rejected(request: Request) -> dict[str, Any] | None:
    """The refusal this worker's config file is under now (the file's name, not its folder), or
    None when the file loaded (or no reloader runs: a test app without one)."""
    reloader = getattr(request.app.state, "reloader", None)
    if reloader is None or not getattr(reloader, "refused", False):
        return None
    last = reloader.last_refusal or {}
    file = last.get("file") or ""
    return {"key": last.get("key", ""), "problem": last.get("problem", ""), "at": last.get("at", ""),
            "file": Path(file).name if file and file != "None" else "", "trigger": last.get("trigger", "")}
