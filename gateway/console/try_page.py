"""`/admin/try`: try a question as any caller, side by side, behind the admin token.

Rationale: docs/design-notes.md, "gateway/console/try_page.py".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dc_fields
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import try_, try_gap
from gateway.console.csrf import post_ok
from gateway.console.i18n import _
from gateway.console.render import gate, json_answer, read_form, runtime
from gateway.console.render import page as page_of
from gateway.console.try_default import with_default_route
from gateway.console.try_gap import FromGap
from gateway.console.try_view import GAP_REASONS, MATCHED, REASONS, dials_text
from gateway.console.users import ConsoleUser
from gateway.core.bodies import read_limited
from gateway.core.errors import TryInvalid
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import MAX_JSON_DEPTH, JsonTooDeep, ProblemError, loads_bounded

MAX_FORM_BYTES = 16 * 1024
SIDE_FIELDS = ("caller", "tenant", "first", "second", "client", "token_id", "session", "route",
               "metadata_condition", "score_threshold", "request_id", "successor")
FORM = "try"


def side_request(form: Mapping[str, str], prefix: str, query: str, limit: str) -> try_.TryRequest:
    """The TryRequest of one side of the form (`prefix` 'a_' or 'b_'). Raises TryInvalid
    naming the field for a limit, threshold or metadata condition that does not parse."""
    got = {name: form.get(prefix + name, "").strip() for name in SIDE_FIELDS}
    n: int | None = None
    if limit.strip():
        if not limit.strip().isdigit():
            raise TryInvalid("limit", _("must be a whole number"))
        n = int(limit)
    condition: Any = None
    if got["metadata_condition"]:
        try:
            condition = loads_bounded(got["metadata_condition"])
        except JsonTooDeep:
            raise TryInvalid(prefix + "metadata_condition", _("nests arrays and objects over %(n)s levels deep "
                                                              "(the limit of a request's JSON)", n=MAX_JSON_DEPTH)
                             ) from None
        except orjson.JSONDecodeError:
            raise TryInvalid(prefix + "metadata_condition", _("is not JSON")) from None
    try:
        threshold = float(got["score_threshold"] or 0)
    except ValueError:
        raise TryInvalid(prefix + "score_threshold", _("must be a number")) from None
    return try_.TryRequest(caller=got["caller"], query=query, limit=n, tenant=got["tenant"], first=got["first"],
                           second=got["second"], client=got["client"], token_id=got["token_id"],
                           session=got["session"], route=got["route"], metadata_condition=condition,
                           score_threshold=threshold, request_id=got["request_id"], successor=got["successor"])


def json_request(data: Any) -> try_.TryRequest:
    """A TryRequest from a JSON object of its field names. Raises TryInvalid."""
    if not isinstance(data, dict):
        raise TryInvalid("body", "must be a JSON object")
    known = {f.name: f for f in dc_fields(try_.TryRequest)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise TryInvalid(unknown[0], "is not a field of a try")
    for name, value in data.items():
        if name == "metadata_condition":
            continue
        if name == "limit":
            ok = value is None or (isinstance(value, int) and not isinstance(value, bool))
        elif name == "score_threshold":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        else:
            ok = isinstance(value, str)
        if not ok:
            raise TryInvalid(name, "has the wrong type")
    if "caller" not in data or "query" not in data:
        raise TryInvalid("caller" if "caller" not in data else "query", "is required")
    return try_.TryRequest(**data)


def _choices(rt: Runtime) -> dict[str, list[str]]:
    cfg = rt.config
    return {
        "tenant": sorted(cfg.tenants),
        "first": sorted({r.first_level_id for t in cfg.tenants.values() for r in t.routes}),
        "second": sorted({r.second_level_id for t in cfg.tenants.values() for r in t.routes}),
        "client": sorted(cfg.agent.clients),
        "route": sorted(cfg.agent.routes),
        "successor": try_.index_names(cfg),
    }


def _render(request: Request, user: ConsoleUser, form: Mapping[str, str],
            sides: list[tuple[str, dict[str, Any] | str]], from_gap: FromGap | None = None,
            member: bool | None = None) -> Response:
    return page_of(request, user, "try.html", active="try", title=_("Try"), form=form, sides=sides,
                   choices=_choices(runtime(request)), callers=try_.CALLERS, reasons=_words(REASONS),
                   from_gap=from_gap, member=member, matched_words=_words(MATCHED), gap_reasons=_words(GAP_REASONS),
                   dials_text=dials_text)


def _words(words: Mapping[str, str]) -> dict[str, str]:
    """`words` (a try_view table of msgids) in the request's language."""
    return {k: _(v) for k, v in words.items()}


async def _sides(request: Request, user: ConsoleUser,
                 form: Mapping[str, str]) -> list[tuple[str, dict[str, Any] | str]]:
    rt = runtime(request)
    form = with_default_route(rt.config, user, form)  # a question alone runs on the user's first route
    query, limit = form.get("query", ""), form.get("limit", "")
    sides: list[tuple[str, dict[str, Any] | str]] = []
    for prefix in ("a_", "b_"):
        if prefix == "b_" and not form.get("b_caller"):
            continue
        try:
            tried = await try_.run(rt, side_request(form, prefix, query, limit), user.name)
            sides.append((prefix, try_.to_json(tried)))
        except TryInvalid as exc:
            sides.append((prefix, exc.message))
    return sides


async def page(request: Request) -> Response:
    """GET /admin/try (the empty form; ?gap=GROUP: prefilled from a gap group, and run when its
    text is kept: gateway.console.try_gap) and POST /admin/try (run it: side a, and b when set;
    with a `gap` field, also whether the question belongs to that group)."""
    user = await gate(request, "view", active="try")
    if request.method in ("GET", "HEAD"):
        wanted = request.query_params.get("gap", "")[:64]
        if not wanted:
            return _render(request, user, with_default_route(runtime(request).config, user, {}), [])
        prefilled = await try_gap.resolve(request, user, wanted)
        sides = await _sides(request, user, prefilled.form) if prefilled.question_kept else []
        return _render(request, user, prefilled.form, sides, prefilled, True if prefilled.question_kept else None)
    form = await read_form(request, user, FORM, max_bytes=MAX_FORM_BYTES, max_fields=64)
    sides = await _sides(request, user, form)
    form = with_default_route(runtime(request).config, user, form)  # shown as it ran
    from_gap: FromGap | None = None
    member: bool | None = None
    if form.get("gap"):
        from_gap = await try_gap.resolve(request, user, form["gap"][:64])
        searched = next((s["searches"][0]["index"] for _, s in sides if not isinstance(s, str) and s["searches"]),
                        from_gap.index)
        if not from_gap.problem and searched and form.get("query", "").strip():
            member = await try_gap.belongs(request, user, from_gap.group, form["query"], searched)
    return _render(request, user, form, sides, from_gap, member)


async def page_json(request: Request) -> Response:
    """POST /admin/try.json: one try as JSON; 400 {"error", "field"} for a try that cannot run."""
    user = await gate(request, "view", as_json=True)
    rt = runtime(request)
    try:
        body = await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError as exc:
        return json_answer({"error": "body too large or too slow"}, 413 if exc.problem.kind == "too_large" else 408)
    if not post_ok(request, request.headers.get("x-csrf-token"), FORM):
        return json_answer({"error": "CSRF check failed"}, 403)
    try:
        data = loads_bounded(body)
    except JsonTooDeep as exc:
        return json_answer({"error": str(exc), "field": "body"}, 400)
    except orjson.JSONDecodeError:
        return json_answer({"error": "body is not JSON", "field": "body"}, 400)
    try:
        tried = await try_.run(rt, json_request(data), user.name)
    except TryInvalid as exc:
        return json_answer({"error": exc.message, "field": exc.field}, 400)
    return json_answer(try_.to_json(tried))


ROUTES = [
    Route("/admin/try", page, methods=["GET", "POST"]),
    json_route("/admin/try.json", page_json, ["POST"]),
]
