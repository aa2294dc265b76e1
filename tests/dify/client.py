"""A client that calls kbgate the way Dify calls an external knowledge API.

Rationale: docs/design-notes.md, "tests/dify/client.py".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx


class RegistrationFailed(Exception):
    """What Dify raises when adding the API fails (its three statuses)."""


def condition(logical_operator: str | None, conditions: list[tuple[str, str, Any]] | None) -> dict[str, Any]:
    """Dify's MetadataCondition as `model_dump()` gives it."""
    return {"logical_operator": logical_operator,
            "conditions": None if conditions is None else [
                {"name": n, "comparison_operator": op, "value": v} for n, op, v in conditions]}


@dataclass
class Dify:
    """One Dify workspace's external knowledge API: the endpoint an admin pasted and the key.
    sent: every retrieval body sent (parsed), for schema checks."""

    endpoint: str
    api_key: str
    sent: list[dict[str, Any]] = field(default_factory=list)

    def register(self) -> httpx.Response:
        """Adding the API in Dify's console. Raises RegistrationFailed as Dify would."""
        r = httpx.post(f"{self.endpoint}/retrieval", headers={"Authorization": f"Bearer {self.api_key}"}, timeout=10)
        if r.status_code == 502:
            raise RegistrationFailed("Bad Gateway: failed to connect to the endpoint")
        if r.status_code == 404:
            raise RegistrationFailed("Not Found: failed to connect to the endpoint")
        if r.status_code == 403:
            raise RegistrationFailed("Forbidden: Authorization failed with api_key")
        return r

    def retrieve(self, knowledge_id: str, query: str, *, top_k: int | None = 5, threshold_enabled: bool = False,
                 score_threshold: float = 0.5, metadata_condition: dict[str, Any] | None = None,
                 ) -> tuple[httpx.Response, list[dict[str, Any]]]:
        """One retrieval as a knowledge-retrieval node sends it: (the response, the records Dify keeps)."""
        params = {
            "retrieval_setting": {"top_k": top_k, "score_threshold": score_threshold if threshold_enabled else 0.0},
            "query": query,
            "knowledge_id": knowledge_id,
            "metadata_condition": metadata_condition,
        }
        self.sent.append(params)
        r = httpx.post(f"{self.endpoint}/retrieval", content=json.dumps(params), timeout=10,
                       headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"})
        records: list[dict[str, Any]] = r.json().get("records", []) if r.status_code == 200 else []
        return r, records
