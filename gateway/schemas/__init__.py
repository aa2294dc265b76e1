"""The public JSON Schemas of the Agent Access tool API (seed 002 §5, §6, §9).

One file per contract, draft 2020-12, each with `$id` https://kbgate.dev/schemas/NAME.json;
files refer to each other by that `$id`. The server validates requests by hand (no
runtime dependency on jsonschema); the contract tests validate every tool's request and
result against these files, so the files are the contract and the code must keep to them.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

BASE_URI = "https://kbgate.dev/schemas/"

NAMES: tuple[str, ...] = (
    "AgentToolRequest", "AgentToolResult", "ErrorObject", "EffectiveScope", "Citation",
    "SearchResult", "Answer", "Page", "ContextPack", "FeedbackRequest",
    "ImprovementTaskRequest", "WriteResult", "ToolInputs",
)


@cache
def load(name: str) -> dict[str, Any]:
    """The schema `name` (one of NAMES) as a dict. Raises KeyError for an unknown name."""
    if name not in NAMES:
        raise KeyError(name)
    text = resources.files(__name__).joinpath(f"{name}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def all_schemas() -> dict[str, dict[str, Any]]:
    """`$id` → schema for every contract (to build a jsonschema referencing registry)."""
    return {BASE_URI + f"{n}.json": load(n) for n in NAMES}
