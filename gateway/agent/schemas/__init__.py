"""JSON Schemas of the agent protocols, shipped as package data.

`load("bailing.agent-knowledge-search.v1")` → the parsed schema (dict). Tests validate
every response against these; operators can hand them to client teams.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """The schema `name` (file stem under gateway/schemas). Raises FileNotFoundError."""
    data: dict[str, Any] = json.loads(files(__package__).joinpath(f"{name}.json").read_text("utf-8"))
    return data
