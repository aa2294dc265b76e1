"""A large upload's outcome, file by file: the whole report kept for its result page in the
console's notes (gateway.console.once, sealed under the login), the short-lived report cookie
naming it (`note`); the page lists every file, refused ones first, under per-outcome counts.
Without the notes (Redis down) the cookie's trimmed report is shown, saying how many are left out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from starlette.requests import Request

from gateway.console.once import OnceStore, valid_id
from gateway.console.session import presented
from gateway.core.errors import DependencyUnavailable

SHORT = 8  # files the cookie's report lists itself; a longer report is kept in the notes


def counts(items: list[dict[str, Any]]) -> dict[str, int]:
    """change → how many files became it ('added', 'updated', 'unchanged', 'refused', …)."""
    return dict(Counter(str(i.get("change", "")) for i in items))


def _once(request: Request) -> OnceStore:
    once: OnceStore = request.app.state.once
    return once


async def kept(request: Request, report: dict[str, Any]) -> dict[str, Any]:
    """`report` with its counts; one of more than SHORT items also kept whole in the notes, the
    returned report naming it (`note`). Unchanged when the notes are not answering."""
    items = report.get("items", [])
    out = {**report, "counts": counts(items), "files": len(items)}
    if len(items) <= SHORT:
        return out
    try:
        note = await _once(request).put(presented(request) or "", {"items": items})
    except DependencyUnavailable:
        return out
    return {**out, "note": note}


async def whole(request: Request, report: dict[str, Any] | None) -> dict[str, Any] | None:
    """The report to show: with every item from the notes when it names one still there (kept
    for the notes' ttl, so a refresh shows it again), refused items first; else as it is."""
    if not report:
        return report
    note = report.get("note")
    items = report.get("items", [])
    if isinstance(note, str) and valid_id(note):
        try:
            got = await _once(request).get(presented(request) or "", note, take=False)
        except DependencyUnavailable:
            got = None
        if got and isinstance(got.get("items"), list):
            items, report = got["items"], {**report, "more": 0}
    ordered = sorted(items, key=lambda i: i.get("change") != "refused")
    return {**report, "items": ordered}
