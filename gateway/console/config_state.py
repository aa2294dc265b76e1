"""The config the server refused, for every console page: the banner that names its key and
reason until the file loads again.

Rationale: docs/design-notes.md, "gateway/console/config_state.py".
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
