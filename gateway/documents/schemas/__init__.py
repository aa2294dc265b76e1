"""JSON Schema of the document API's answers (gateway/documents/), shipped as package data:
`load("documents.result")`. The tests validate every answer against it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """The schema `name` (file stem under gateway/documents/schemas). Raises FileNotFoundError."""
    data: dict[str, Any] = json.loads(files(__package__).joinpath(f"{name}.json").read_text("utf-8"))
    return data
