"""What every console page uses to answer: the templates, the shared navigation, the gate
(who is asking and may they), CSRF-checked forms and POST-redirect-GET.

Rationale: docs/design-notes.md, "gateway/console/render.py".
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import jinja2
import orjson
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.templating import Jinja2Templates

from gateway.console import i18n
from gateway.console.config_state import rejected
from gateway.console.csrf import FIELD, login_token, page_token, post_ok, set_login_cookie
from gateway.console.i18n import N_, _
from gateway.console.language import links as language_links
from gateway.console.links import document_url, index_url
from gateway.console.scores import score_text
from gateway.console.session import LoginBusy, Throttled, console_enabled, current_user
from gateway.console.sessions import SessionsUnavailable
from gateway.console.text import visible
from gateway.console.users import ConsoleUser, can
from gateway.console.words import word
from gateway.core.bodies import read_limited
from gateway.core.runtime import Runtime
from gateway.core.validate import ProblemError

TEMPLATES = Path(__file__).with_name("templates")
MAX_FORM_BYTES = 4096

SECURITY_HEADERS = {
    "cache-control": "no-store",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}
JSON_HEADERS = {"cache-control": "no-store"}
# what a refusal says the role does not allow, by users.ACTIONS key
ACTION_WORDS = {"view": N_("view"), "view_gaps": N_("view gaps"), "edit_documents": N_("edit documents"),
                "file_gap": N_("file gap"), "edit_synonyms": N_("edit synonyms"),
                "manage_indexes": N_("manage indexes"), "manage_tenants": N_("manage tenants"),
                "manage_users": N_("manage users")}

# The one navigation: (key, label, href). A page passes its key as `active`.
NAV: tuple[tuple[str, str, str], ...] = (
    ("overview", N_("Overview"), "/admin/"),
    ("try", N_("Try"), "/admin/try"),
    ("gaps", N_("Gaps"), "/admin/gaps"),
    ("tasks", N_("Tasks"), "/admin/tasks"),
    ("indexes", N_("Indexes"), "/admin/indexes"),
    ("synonyms", N_("Synonyms"), "/admin/synonyms"),
    ("tenants", N_("Tenants"), "/admin/tenants"),
    ("deliveries", N_("Deliveries"), "/admin/deliveries"),
    ("users", N_("Users"), "/admin/users"),
)


NAV_NEEDS = {"users": "manage_users"}  # a nav entry's page asks this (users.can); others ask "view"


def when_seconds(ts: Any) -> str:
    """Unix seconds → 'YYYY-MM-DD HH:MM:SS UTC'; '-' for anything not a number."""
    if not isinstance(ts, int | float) or isinstance(ts, bool):
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def when_minutes(ts: Any) -> str:
    """Unix seconds → 'YYYY-MM-DD HH:MM UTC'; '-' for 0, None or not a number."""
    if not ts or not isinstance(ts, int | float):
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")


def ms(v: Any) -> str:
    """Milliseconds with one decimal; '-' when not a number."""
    return f"{v:.1f}" if isinstance(v, int | float) else "-"


def num(v: Any, digits: int = 4) -> str:
    """A float with `digits` decimals; '-' for None."""
    return "-" if v is None else f"{v:.{digits}f}"


def size(v: Any) -> str:
    """Bytes as '812 B', '4.2 KB', '1.3 MB' (1024s); '—' for None."""
    if not isinstance(v, int) or isinstance(v, bool):
        return "—"
    if v < 1024:
        return f"{v} B"
    return f"{v / 1024:.1f} KB" if v < 1024 * 1024 else f"{v / 1024 / 1024:.1f} MB"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True, finalize=visible,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                             extensions=["jinja2.ext.i18n"])
    # new-style: the template's values are escaped into the translated text, never the text itself
    env.install_gettext_callables(i18n.gettext_raw, i18n.ngettext_raw, newstyle=True)  # type: ignore[attr-defined]
    env.policies["ext.i18n.trimmed"] = True  # a {% trans %} block's msgid is its text with whitespace collapsed
    env.filters.update(when_seconds=when_seconds, when=when_minutes, ms=ms, num=num, repr=repr, word=word,
                       score=score_text, size=size)
    env.globals["document_url"] = document_url  # every link to a document or chunk (gateway.console.links)
    env.globals["index_url"] = index_url  # every link to an index's page
    return env


templates = Jinja2Templates(env=_environment())


def runtime(request: Request) -> Runtime:
    """The app's Runtime (its config is the one in force now)."""
    rt: Runtime = request.app.state.runtime
    return rt


def page(request: Request, user: ConsoleUser | None, template: str, *, active: str = "", title: str,
         status: int = 200, **context: Any) -> Response:
    """Render `template` for `user` (None: logged out, no navigation) with the shared
    context: user, nav, active (the nav key to mark), title, csrf(form) → the form's token,
    show_queries, can(action, index)."""
    shared = {
        "user": user, "title": title, "active": active,
        "nav": [{"key": k, "label": i18n._(label), "href": href} for k, label, href in NAV
                if user is None or can(user, NAV_NEEDS.get(k, "view"))],  # only what the user may open
        "lang": i18n.current_tag(), "languages": language_links(request.url.path + (
            "?" + request.url.query if request.url.query else "")),
        "csrf": lambda form: page_token(request, form),
        "show_queries": runtime(request).config.admin.show_queries,
        "can": lambda action, index=None: can(user, action, index),
        "config_rejected": rejected(request) if user is not None else None,
    }
    return templates.TemplateResponse(request, template, {**shared, **context}, status_code=status,
                                      headers=SECURITY_HEADERS, media_type="text/html; charset=utf-8")


def not_found() -> Response:
    """The console's answer when it is not configured: a plain 404, as if absent."""
    return Response("Not Found", status_code=404, media_type="text/plain", headers={"cache-control": "no-store"})


def wants_json(request: Request) -> bool:
    """Whether the client asks for JSON and not a page (Accept names application/json, not text/html)."""
    accept = request.headers.get("accept", "").lower()
    return "application/json" in accept and "text/html" not in accept


def message(request: Request, user: ConsoleUser | None, heading: str, text: str, *, status: int,
            kind: str = "error", back: str = "", active: str = "") -> Response:
    """A page in the layout holding one message (an error: role=alert; a note: role=status); for
    a client that asks for JSON (`wants_json`), an error is {"error": text} with the same status."""
    if kind == "error" and wants_json(request):
        return json_answer({"error": text}, status)
    return page(request, user, "message.html", active=active, title=heading, status=status, heading=heading,
                message=text, kind=kind, back=back)


def json_answer(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """`data` as JSON (orjson), never cached."""
    return Response(orjson.dumps(data), status_code=status, media_type="application/json",
                    headers={**JSON_HEADERS, **(headers or {})})


def refusal(request: Request, user: ConsoleUser | None, *, as_json: bool, status: int, text: str,
            active: str = "") -> Response:
    """A refusal: {"error": text} for a JSON twin or a tool, else the message page."""
    if as_json:
        return json_answer({"error": text}, status)
    return message(request, user, _("Not allowed") if status == 403 else _("Cannot do that"), text, status=status,
                   active=active)


class Answered(Exception):
    """The answer to send instead of the page: raised by the gate and the form checks, sent by
    `answered`, the console's exception handler (no handler checks for a Response)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


async def answered(request: Request, exc: Exception) -> Response:
    """The exception handler of `Answered`: its response, as it was made."""
    assert isinstance(exc, Answered)
    return exc.response


async def gate(request: Request, action: str, index: str | None = None, *, as_json: bool = False,
         active: str = "") -> ConsoleUser:
    """The user when they may do `action` (users.can) on `index`; otherwise raises Answered with the answer:
    404 when no console is configured, the login form (401; JSON {"error"} with
    WWW-Authenticate: Bearer for a twin) when not logged in, a 403 refusal naming the role
    needed when logged in without the right."""
    if not console_enabled(runtime(request).config):
        raise Answered(not_found())
    as_json = as_json or wants_json(request)
    try:
        user = await current_user(request)
    except Throttled as exc:
        raise Answered(_refused_login(request, as_json, 429, _("Too many failed logins: try again in %(n)s s.",
                                                               n=exc.wait), exc.wait)) from None
    except LoginBusy:
        raise Answered(_refused_login(request, as_json, 503, _("Too many logins are being checked right now: try "
                                                               "again in a second."), 1)) from None
    except SessionsUnavailable:
        raise Answered(unavailable(request, as_json)) from None
    if user is None:
        if as_json:
            raise Answered(json_answer({"error": "console login required (admin token or user credential)"}, 401,
                                       {"www-authenticate": "Bearer"}))
        raise Answered(login_form(request, status=401))
    if not can(user, action, index):
        if as_json:  # a tool's error stays in English
            what = f" on index {index}" if index else ""
            said = f"Your role ({user.role_name}) does not allow {action.replace('_', ' ')}{what}; ask an admin."
            raise Answered(json_answer({"error": said}, 403))
        text = (_("Your role (%(role)s) does not allow %(action)s on index %(index)s; ask an admin.",
                  role=user.role_label, action=_(ACTION_WORDS.get(action, action)), index=index) if index else
                _("Your role (%(role)s) does not allow %(action)s; ask an admin.", role=user.role_label,
                  action=_(ACTION_WORDS.get(action, action))))
        raise Answered(refusal(request, user, as_json=False, status=403, active=active, text=text))
    return user


def _refused_login(request: Request, as_json: bool, status: int, text: str, retry_after: int) -> Response:
    """A Bearer credential or login not checked (429 waiting, 503 busy), with Retry-After."""
    if as_json:
        return json_answer({"error": text}, status, {"retry-after": str(retry_after)})
    resp = login_form(request, status=status, text=text)
    resp.headers["retry-after"] = str(retry_after)
    return resp


SESSIONS_AWAY = N_("The console cannot check logins right now: Redis, which keeps the console's sessions, is not "
                 "answering. Nothing is wrong with your login; try again shortly (tools with Authorization: Bearer "
                 "keep working).")


def unavailable(request: Request, as_json: bool = False) -> Response:
    """The answer while sessions cannot be checked (Redis away): 503 saying so, never the login form."""
    if as_json:
        return json_answer({"error": SESSIONS_AWAY}, 503, {"retry-after": "5"})
    resp = message(request, None, _("Sessions unavailable"), _(SESSIONS_AWAY), status=503)
    resp.headers["retry-after"] = "5"
    return resp


def login_form(request: Request, *, status: int = 401, text: str = "", name: str = "") -> Response:
    """The login form (POST /admin/login: fields `user`, `token`, `csrf`), with its CSRF cookie
    (gateway.console.csrf.login_token)."""
    token = login_token(request)
    resp = page(request, None, "login.html", title=_("Log in"), status=status, message=text, name=name,
                login_csrf=token)
    set_login_cookie(request, resp, token)
    return resp


def see_other(url: str) -> Response:
    """POST-redirect-GET: 303 to `url` (a path of this console), so a refresh repeats nothing."""
    return RedirectResponse(url, status_code=303, headers={"cache-control": "no-store"})


def form_fields(body: bytes, max_fields: int) -> dict[str, str] | None:
    """The fields of a urlencoded body (first value of each, blanks kept); None when it holds
    more than `max_fields` fields (parse_qs' bound: it raises ValueError past it)."""
    try:
        parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=max_fields)
    except ValueError:
        return None
    return {k: v[0] for k, v in parsed.items()}


def too_many_fields(max_fields: int) -> str:
    """The refusal of a form with more fields than it takes, naming the limit."""
    return _("The form has more than %(n)s fields, the most this form takes: open the page again and resubmit.",
             n=max_fields)


async def read_form(request: Request, user: ConsoleUser | None, form: str, *, max_bytes: int = MAX_FORM_BYTES,
                    max_fields: int = 16) -> dict[str, str]:
    """The fields of a urlencoded form POST (first value of each), after the CSRF check of
    `form` (gateway.console.csrf.post_ok); otherwise raises Answered with the answer: 413/408 for a body too large
    or too slow, 400 for more than `max_fields` fields (naming the limit), 403 for a stale or
    cross-site form."""
    try:
        body = await read_limited(request.stream(), max_bytes, runtime(request).config.server.body_timeout_seconds)
    except ProblemError as exc:
        too_large = exc.problem.kind == "too_large"
        raise Answered(message(request, user, _("Form refused"), _("The form is too large.") if too_large
                               else _("The form did not arrive in time."), status=413 if too_large else 408)) from None
    fields = form_fields(body, max_fields)
    if fields is None:
        raise Answered(message(request, user, _("Form refused"), too_many_fields(max_fields), status=400))
    if not post_ok(request, fields.get(FIELD), form):
        raise Answered(message(request, user, _("Form refused"), _("This form expired or came from another site: "
                               "open the page again and resubmit."), status=403))
    return fields
