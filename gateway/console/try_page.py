"""`/admin/try`: try a question as any caller, side by side (issue 18, item 1), behind the admin token.

GET  /admin/try        the form (the login form, 401, when not logged in)
POST /admin/try        form fields (below) → the form again with each side's answer and trace
POST /admin/try.json   a JSON object of one `TryRequest`'s fields → `gateway.console.try_.to_json`

Form fields: `query`, `limit` (shared by both sides), then per side `a_` / `b_` + caller,
tenant, first, second, client, token_id, session, route, metadata_condition (a JSON object,
as Dify sends it), score_threshold, request_id, successor; side b runs when its caller is set.
POSTs are CSRF-checked (gateway.console.csrf). The question is a POST field, never in a URL,
so it reaches no access log; nothing here logs it. With no `admin.token_sha256` every path is 404.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields as dc_fields
from typing import Any
from urllib.parse import parse_qs

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway.console import _html, _not_found, is_admin, try_
from gateway.console.csrf import FIELD, page_token, post_ok
from gateway.console.page import login_page
from gateway.console.try_view import try_page
from gateway.core.bodies import read_limited
from gateway.core.errors import TryInvalid
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

MAX_FORM_BYTES = 16 * 1024
SIDE_FIELDS = ("caller", "tenant", "first", "second", "client", "token_id", "session", "route",
               "metadata_condition", "score_threshold", "request_id", "successor")
FORM = "try"


def _runtime(request: Request) -> Runtime:
    rt: Runtime = request.app.state.runtime
    return rt


def side_request(form: Mapping[str, str], prefix: str, query: str, limit: str) -> try_.TryRequest:
    """The TryRequest of one side of the form (`prefix` 'a_' or 'b_'). Raises TryInvalid
    naming the field for a limit, threshold or metadata condition that does not parse."""
    got = {name: form.get(prefix + name, "").strip() for name in SIDE_FIELDS}
    n: int | None = None
    if limit.strip():
        if not limit.strip().isdigit():
            raise TryInvalid("limit", "must be a whole number")
        n = int(limit)
    condition: Any = None
    if got["metadata_condition"]:
        try:
            condition = orjson.loads(got["metadata_condition"])
        except orjson.JSONDecodeError:
            raise TryInvalid(prefix + "metadata_condition", "is not JSON") from None
    try:
        threshold = float(got["score_threshold"] or 0)
    except ValueError:
        raise TryInvalid(prefix + "score_threshold", "must be a number") from None
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


async def _body(request: Request) -> bytes | Response:
    rt = _runtime(request)
    try:
        return await read_limited(request.stream(), MAX_FORM_BYTES, rt.config.server.body_timeout_seconds)
    except ProblemError as exc:
        too_large = exc.problem.kind == "too_large"
        return _html("<!DOCTYPE html><meta charset=utf-8><p>The form is too large.</p>" if too_large else
                     "<!DOCTYPE html><meta charset=utf-8><p>The form did not arrive in time.</p>",
                     413 if too_large else 408)


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


async def page(request: Request) -> Response:
    """GET /admin/try (the empty form) and POST /admin/try (run it: side a, and b when set)."""
    rt = _runtime(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    if not is_admin(request):
        return _html(login_page(), 401)
    csrf = page_token(request, FORM)
    if request.method == "GET":
        return _html(try_page({}, [], csrf=csrf, choices=_choices(rt)))
    body = await _body(request)
    if isinstance(body, Response):
        return body
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=64)
    form = {k: v[0] for k, v in parsed.items()}
    if not post_ok(request, form.get(FIELD), FORM):
        return _html("<!DOCTYPE html><meta charset=utf-8><p>This form expired or came from another site: "
                     "open /admin/try again.</p>", 403)
    query, limit = form.get("query", ""), form.get("limit", "")
    sides: list[tuple[str, dict[str, Any] | str]] = []
    for prefix in ("a_", "b_"):
        if prefix == "b_" and not form.get("b_caller"):
            continue
        try:
            tried = await try_.run(rt, side_request(form, prefix, query, limit))
            sides.append((prefix, try_.to_json(tried)))
        except TryInvalid as exc:
            sides.append((prefix, exc.message))
    return _html(try_page(form, sides, csrf=csrf, choices=_choices(rt)))


async def page_json(request: Request) -> Response:
    """POST /admin/try.json: one try as JSON; 400 {"error", "field"} for a try that cannot run."""
    rt = _runtime(request)
    if rt.config.admin.token_sha256 is None:
        return _not_found()
    headers = {"cache-control": "no-store"}
    if not is_admin(request):
        return JSONResponse({"error": "admin token required"}, status_code=401,
                            headers={**headers, "www-authenticate": "Bearer"})
    body = await _body(request)
    if isinstance(body, Response):
        return JSONResponse({"error": "body too large or too slow"}, status_code=body.status_code, headers=headers)
    if not post_ok(request, request.headers.get("x-csrf-token"), FORM):
        return JSONResponse({"error": "CSRF check failed"}, status_code=403, headers=headers)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return JSONResponse({"error": "body is not JSON", "field": "body"}, status_code=400, headers=headers)
    try:
        tried = await try_.run(rt, json_request(data))
    except TryInvalid as exc:
        return JSONResponse({"error": exc.message, "field": exc.field}, status_code=400, headers=headers)
    return Response(orjson.dumps(try_.to_json(tried)), media_type="application/json", headers=headers)


ROUTES = [
    Route("/admin/try", page, methods=["GET", "POST"]),
    json_route("/admin/try.json", page_json, ["POST"]),
]
