"""`/admin/synonyms`: an index's synonyms from the browser (the file stays the source of truth:
gateway.console.synonyms_file).

Rationale: docs/design-notes.md, "gateway/console/synonyms_page.py".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson
from anyio import to_thread
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.console import synonyms_file as sf
from gateway.console.changes import audit_change
from gateway.console.csrf import post_ok
from gateway.console.i18n import _
from gateway.console.render import gate, json_answer, page, read_form, refusal, runtime, see_other
from gateway.console.synonyms_start import start_page
from gateway.console.synonyms_try import tried
from gateway.console.users import ConsoleUser, can
from gateway.core.bodies import read_limited
from gateway.core.errors import DependencyUnavailable
from gateway.core.methods import json_route
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError
from indexes.synonyms import Synonyms

FORM = "synonyms"
ACTIONS = ("save", "add", "remove", "revert")
MAX_RULE_ROWS = 500


def _files(rt: Runtime) -> dict[str, Path]:
    """Index name → its synonyms file, for every index the config gives one."""
    return {name: Path(s.source) for name, s in rt.config.synonyms.items()}


def _shown(rt: Runtime, path: Path) -> str:
    """The file's path as the config names it (relative to the config's folder when under it)."""
    base = rt.config.source.parent if rt.config.source is not None else None
    if base is not None:
        rel = os.path.relpath(path, base)
        if not rel.startswith(".."):
            return rel
    return str(path)


def _indexes(rt: Runtime) -> list[str]:
    names = set(rt.routed_indexes()) | set(rt.config.synonyms) | set(rt.indexes.names())  # a new index too
    return sorted(names)


def _summary(rt: Runtime, name: str) -> dict[str, Any]:
    path = _files(rt).get(name)
    if path is None:
        return {"index": name, "file": None}
    shown = _shown(rt, path)
    try:
        state = sf.read(path, shown)
    except sf.NotWritable as exc:
        return {"index": name, "file": shown, "error": str(exc)}
    last = next(iter(sf.history(path)), None)
    return {"index": name, "file": shown, "rules": state.rules, "sha256": state.digest,
            "refused": [{"line": n, "problem": p} for n, p in state.refused],
            "last_change": {k: last.get(k) for k in ("at", "by", "action")} if last else None}


async def list_html(request: Request) -> Response:
    """GET /admin/synonyms."""
    user = await gate(request, "view", active="synonyms")
    rt = runtime(request)
    rows = [_summary(rt, n) for n in _indexes(rt)]
    return page(request, user, "synonyms.html", active="synonyms", title=_("Synonyms"), rows=rows)


async def list_json(request: Request) -> Response:
    """GET /admin/synonyms.json: {"indexes": [summary]}."""
    await gate(request, "view", as_json=True)
    rt = runtime(request)
    return json_answer({"indexes": [_summary(rt, n) for n in _indexes(rt)]})


def _detail(rt: Runtime, index: str) -> dict[str, Any] | None:
    path = _files(rt).get(index)
    if path is None:
        return None
    shown = _shown(rt, path)
    state = sf.read(path, shown)
    rules: list[dict[str, Any]] = []
    for n, line in enumerate(state.text.splitlines(), 1):
        if line.strip() and not line.strip().startswith("#") and len(rules) < MAX_RULE_ROWS:
            rules.append({"number": n, "line": line.strip()})
    # a line holding a character the page cannot show as it is (shown escaped) cannot be changed here
    hidden = [{"line": n, "problem": p} for n, p in sf.hidden_lines(state.text)]
    return {"index": index, "file": shown, "path": path, "text": state.text, "sha256": state.digest,
            "rules": state.rules, "lines": rules, "hidden": hidden,
            "editable": len(state.text.encode("utf-8")) <= sf.MAX_EDIT_BYTES and not hidden,
            "refused": [{"line": n, "problem": p} for n, p in state.refused],
            "history": [{k: e.get(k) for k in ("at", "by", "action", "added", "removed")}
                        for e in sf.history(path)]}


async def _index_page(request: Request, user: ConsoleUser, index: str, *, status: int = 200, text: str | None = None,
                      refused: list[tuple[int, str]] | None = None, error: str = "",
                      try_result: dict[str, Any] | None = None, query: str = "") -> Response:
    rt = runtime(request)
    try:
        d = _detail(rt, index)
    except sf.NotWritable as exc:
        return refusal(request, user, as_json=False, status=503, text=str(exc), active="synonyms")
    if d is None:  # no file yet: the first save creates one (gateway/console/synonyms_start.py)
        if not request.app.state.document_writes.exists(index):
            return refusal(request, user, as_json=False, status=404, active="synonyms",
                           text=_("No index is named %(index)s.", index=index))
        return start_page(request, user, index)
    submitted = text if text is not None else d["text"]
    lines = submitted.splitlines()
    marked = [{"line": n, "text": lines[n - 1] if 0 < n <= len(lines) else "", "problem": p}
              for n, p in (refused or [])]
    return page(request, user, "synonyms_index.html", active="synonyms", title=_("Synonyms of %(index)s",
                                                                                 index=index), status=status,
                d=d, text=submitted, marked=marked, error=error, try_result=try_result, query=query,
                editable=can(user, "edit_synonyms", index) and d["editable"],
                note=request.query_params.get("done", "")[:16])


async def index_html(request: Request) -> Response:
    """GET /admin/synonyms/{index}."""
    index = request.path_params["index"]
    user = await gate(request, "view", active="synonyms")
    return await _index_page(request, user, index)


def _change(rt: Runtime, index: str, fields: dict[str, str], who: str) -> tuple[str, Synonyms]:
    """Run one change (`fields['action']`: save, add, remove, revert) on the index's file; returns
    (action, new rules). Raises what synonyms_file raises; KeyError for an unknown index."""
    path = _files(rt)[index]
    shown = _shown(rt, path)
    action, base = fields.get("action", "save"), fields.get("base", "")
    if action == "revert":
        return action, sf.revert(path, shown, who=who, base=base, now=rt.clock.now())
    current = sf.read(path, shown).text
    if action == "add":
        line = " ".join(fields.get("line", "").split())
        if not line:
            raise sf.SynonymsRefused([(current.count("\n") + 1,
                                       _("is empty: write a rule such as 'a, b' or 'a => b'"))])
        text = current + ("" if not current or current.endswith("\n") else "\n") + line + "\n"
    elif action == "remove":
        lines = current.splitlines(keepends=True)
        n = int(fields.get("number", "0")) if fields.get("number", "").isdigit() else 0
        if not 0 < n <= len(lines) or lines[n - 1].strip() != fields.get("line", "").strip():
            raise sf.Stale(_("line %(n)s is not that rule any more: open the page again", n=n))
        text = "".join(lines[:n - 1] + lines[n:])
    else:
        text = fields.get("text", "").replace("\r\n", "\n")
    return action, sf.write(path, shown, text, base, who=who, action=action, now=rt.clock.now())


async def change_html(request: Request) -> Response:
    """POST /admin/synonyms/{index}[/add|/remove|/revert] (module doc)."""
    index = request.path_params["index"]
    action = request.path_params.get("action", "save")
    if action not in ACTIONS:
        return Response("Not Found", status_code=404, media_type="text/plain")
    user = await gate(request, "edit_synonyms", index, active="synonyms")
    # URL-encoded UTF-8: up to 9 characters per CJK character
    fields = await read_form(request, user, FORM, max_bytes=sf.MAX_EDIT_BYTES * 9 + 4096, max_fields=8)
    rt = runtime(request)
    if index not in _files(rt):
        return await _index_page(request, user, index)
    try:
        done, rules = await to_thread.run_sync(_change, rt, index, {**fields, "action": action}, user.name)
    except sf.SynonymsRefused as exc:
        audit_change(rt.config, user.name, f"synonyms.{action}", index, status=400, refused=len(exc.lines))
        text = fields.get("text") if action == "save" else None
        if action == "add":
            current = sf.read(_files(rt)[index], "").text
            text = current + ("" if not current or current.endswith("\n") else "\n") + fields.get("line", "") + "\n"
        return await _index_page(request, user, index, status=400, text=text, refused=exc.lines,
                                 error=_("Nothing was changed: fix the refused lines below and save again."))
    except (sf.Stale, sf.NotWritable) as exc:
        audit_change(rt.config, user.name, f"synonyms.{action}", index, status=409, reason=type(exc).__name__)
        return await _index_page(request, user, index, status=409 if isinstance(exc, sf.Stale) else 503,
                                 text=fields.get("text") if action == "save" else None,
                                 error=_("Nothing was changed: %(problem)s", problem=exc))
    sf.apply(rt, index, rules)
    audit_change(rt.config, user.name, f"synonyms.{done}", index, rules=len(rules.rules))
    return see_other(f"/admin/synonyms/{index}?done={done}")


async def try_html(request: Request) -> Response:
    """POST /admin/synonyms/{index}/try: the page with a search of the index (synonyms_try)."""
    index = request.path_params["index"]
    user = await gate(request, "view", active="synonyms")
    fields = await read_form(request, user, "synonyms-try", max_fields=4)
    rt = runtime(request)
    query = fields.get("query", "")[:2000]
    try:
        result = await tried(rt, index, query) if query.strip() else None
    except DependencyUnavailable:
        return await _index_page(request, user, index, status=503, error=_("The index cannot be opened now."))
    audit_change(rt.config, user.name, "synonyms.try", index, hits=len(result["hits"]) if result else 0)
    return await _index_page(request, user, index, try_result=result, query=query)


async def index_json(request: Request) -> Response:
    """GET and POST /admin/synonyms/{index}.json (module doc)."""
    index = request.path_params["index"]
    writing = request.method == "POST"
    user = await gate(request, "edit_synonyms" if writing else "view", index if writing else None, as_json=True)
    rt = runtime(request)
    if index not in _files(rt):
        return json_answer({"error": f"index {index!r} has no synonyms file"}, 404)
    if writing:
        if not post_ok(request, request.headers.get("x-csrf-token"), FORM):
            return json_answer({"error": "CSRF check failed (send the Bearer token, or X-CSRF-Token)"}, 403)
        try:
            body = await read_limited(request.stream(), sf.MAX_EDIT_BYTES * 2, rt.config.server.body_timeout_seconds)
            data = orjson.loads(body)
        except ProblemError:
            return json_answer({"error": "the body is too large or did not arrive in time"}, 413)
        except orjson.JSONDecodeError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get("base", ""), str) or \
                not (data.get("revert") is True or isinstance(data.get("text"), str)):
            return json_answer({"error": "the body must be {\"text\": str, \"base\": sha256} or "
                                         "{\"revert\": true, \"base\": sha256}"}, 400)
        fields = {"action": "revert" if data.get("revert") is True else "save", "text": data.get("text") or "",
                  "base": data.get("base") or ""}
        try:
            done, rules = await to_thread.run_sync(_change, rt, index, fields, user.name)
        except sf.SynonymsRefused as exc:
            audit_change(rt.config, user.name, f"synonyms.{fields['action']}", index, status=400,
                         refused=len(exc.lines))
            return json_answer({"error": "lines refused; nothing was changed",
                                "refused": [{"line": n, "problem": p} for n, p in exc.lines]}, 400)
        except (sf.Stale, sf.NotWritable) as exc:
            return json_answer({"error": str(exc)}, 409 if isinstance(exc, sf.Stale) else 503)
        sf.apply(rt, index, rules)
        audit_change(rt.config, user.name, f"synonyms.{done}", index, rules=len(rules.rules))
    try:
        d = _detail(rt, index)
    except sf.NotWritable as exc:
        return json_answer({"error": str(exc)}, 503)
    assert d is not None
    return json_answer({k: v for k, v in d.items() if k != "path"})


ROUTES = [
    Route("/admin/synonyms", list_html, methods=["GET"]),
    json_route("/admin/synonyms.json", list_json, ["GET"]),
    json_route("/admin/synonyms/{index}.json", index_json, ["GET", "POST"]),
    Route("/admin/synonyms/{index}", index_html, methods=["GET"]),
    Route("/admin/synonyms/{index}", change_html, methods=["POST"]),
    Route("/admin/synonyms/{index}/try", try_html, methods=["POST"]),
    Route("/admin/synonyms/{index}/{action:str}", change_html, methods=["POST"]),
]
