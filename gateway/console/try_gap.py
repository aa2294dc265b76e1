"""A try from a gap group (`/admin/try?gap=GROUP`): the group is named by its id, resolved here on
the server, never by its question text in a URL.

Rationale: docs/design-notes.md, "gateway/console/try_gap.py".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from anyio import to_thread
from redis.exceptions import RedisError
from starlette.requests import Request

from gateway.console.gaps.groups import Group, Question, group
from gateway.console.gaps.keys import question_key
from gateway.console.gaps.owners import visible_groups
from gateway.console.gaps.record import GapRecorder
from gateway.console.i18n import _
from gateway.console.users import ConsoleUser
from gateway.core.errors import DependencyUnavailable
from gateway.core.runtime import Runtime

WINGS = {"volcengine": "volcengine", "dify": "dify", "mcp": "mcp", "agent": "tools", "knowledge": "knowledge"}


@dataclass(slots=True)
class FromGap:
    """group: its id; index: the index it is about ('' unknown); form: the try form's prefilled
    fields; question_kept: its text was found (and is in form['query']); problem: why it cannot
    be resolved ('' when it can)."""

    group: str
    index: str = ""
    form: dict[str, str] = field(default_factory=dict)
    question_kept: bool = False
    problem: str = ""


def _state(request: Request) -> tuple[Runtime, GapRecorder]:
    return request.app.state.runtime, request.app.state.gaps


async def _groups(request: Request, user: ConsoleUser, *, with_examples: bool) -> tuple[list[Group], dict[str, str],
                                                                                          list[Question]]:
    rt, rec = _state(request)
    questions = await rec.store.questions(rt.config.gaps, rt.clock.now(), with_examples=with_examples)
    shown, about = visible_groups(user, group(questions, rt.config.gaps.max_examples), rt.config)
    return shown, about, questions


def prefilled(g: Group) -> dict[str, str]:
    """The try form's fields for group `g` (module doc); 'query' only when its text is kept."""
    form: dict[str, str] = {"gap": g.id}
    caller = g.callers.most_common(1)[0][0] if g.callers else ""
    wing, _, name = caller.partition(":")
    form["a_caller"] = WINGS.get(wing, "volcengine")
    label = next((r for r, _ in g.routes.most_common() if r != "-"), "")
    if form["a_caller"] == "volcengine":
        parts = label.split("/", 2)
        form["a_tenant"] = name or parts[0]
        if len(parts) == 3:
            form["a_first"], form["a_second"] = parts[1], parts[2]
    else:
        form["a_client"] = name
        if "," not in label:
            form["a_route"] = label
    if g.examples:
        form["query"] = g.examples[0]
    return form


async def resolve(request: Request, user: ConsoleUser, group_id: str) -> FromGap:
    """The prefilled try of the group `group_id` that `user` may see (module doc)."""
    rt, _rec = _state(request)
    try:
        shown, about, _states = await _groups(request, user, with_examples=rt.config.gaps.keep_text)
    except DependencyUnavailable:
        return FromGap(group_id, problem=_("The gaps record (Redis) is not answering; try again shortly."))
    g = next((x for x in shown if x.id == group_id), None)
    if g is None:
        return FromGap(group_id, problem=_("No such gap group (it may have expired)."))
    form = prefilled(g)
    return FromGap(g.id, about[g.id], form, "query" in form)


async def belongs(request: Request, user: ConsoleUser, group_id: str, query: str, index: str) -> bool | None:
    """Whether `query`, asked on `index`, would join the group `group_id` (module doc); None when
    that cannot be told (the record or its key unavailable, the group gone)."""
    rt, rec = _state(request)
    try:
        secret = await rec.secret()
        _, _, questions = await _groups(request, user, with_examples=False)
    except (DependencyUnavailable, RedisError, OSError, TimeoutError):
        return None
    if not any(q.key == group_id for q in questions):
        return None
    words = await to_thread.run_sync(rec.words_of, index, query)
    qk = question_key(secret, query, words)
    if any(q.key == qk.key for q in questions):
        mine = qk.key
    else:
        mine = "\x00probe"  # not kept yet: a question of its own, grouped by the same rule
        questions = [*questions, Question(mine, qk.terms, count=1, first=rt.clock.now(), last=rt.clock.now())]
    for g in group(questions, rt.config.gaps.max_examples):
        members = set(g.keys)
        if mine in members:
            return group_id in members
    return False
