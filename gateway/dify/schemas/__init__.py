"""JSON Schemas of Dify's External Knowledge API as kbgate reads and answers it, shipped as
package data: `load("dify.retrieval-request")`, `load("dify.retrieval-response")`,
`load("dify.error")`. The tests validate every request they send and every answer against them.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Any


@cache
def load(name: str) -> dict[str, Any]:
    """The schema `name` (file stem under gateway/dify/schemas). Raises FileNotFoundError."""
    data: dict[str, Any] = json.loads(files(__package__).joinpath(f"{name}.json").read_text("utf-8"))
    return data
