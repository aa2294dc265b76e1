"""The overview's values (its page and its JSON twin serve the same dict): every route at a glance.

Rationale: docs/design-notes.md, "gateway/console/overview_data.py".
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError
from starlette.concurrency import run_in_threadpool

from gateway.console.asked import QuestionCounts
from gateway.console.browse import disabled_count
from gateway.console.i18n import _
from gateway.core.config import Config
from gateway.core.errors import DependencyUnavailable
from gateway.core.readiness import RouteState, keyless_tenants, route_states
from gateway.core.runtime import Runtime
from gateway.ops.deliveries import DeliveryLog
from gateway.volcengine.keyuse import KeyUsage

HOUR = 3600.0
SYNC_STATE = "kbgate-sync.json"  # gateway.sync.plan.STATE_FILE: written after a sync's commit
PROTOCOLS = (("dify.retrieval", "Dify"), ("mcp.search", "MCP"), ("search", "tool API"),
             ("knowledge.search", "knowledge protocol"))


def route_id(s: RouteState) -> str:
    """The id questions are counted under: 'TENANT/FIRST/SECOND' or the agent route's name."""
    if s.kind != "tenant":
        return s.route
    tenant, _sep, path = s.route.partition(" ")
    return f"{tenant}/{path}"


def callers(config: Config, s: RouteState) -> list[str]:
    """Who calls the route: 'Volcengine tenant acme', or per agent client 'alice: Dify, MCP'."""
    if s.kind == "tenant":
        return [f"Volcengine tenant {s.route.partition(' ')[0]}"]
    out = []
    for cid, c in sorted(config.agent.clients.items()):
        if s.route in c.policy.routes:
            names = [label for grant, label in PROTOCOLS if grant in c.policy.tools]
            out.append(f"{cid}: {', '.join(names) or 'no search grant'}")
    return out


def _index_facts(rt: Runtime, names: list[str]) -> dict[str, dict[str, Any]]:
    """Blocking (opens indexes, stats a file): run in a worker thread."""
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        facts: dict[str, Any] = {"documents": None, "chunks": None, "commit": None, "last_commit": None,
                                 "last_sync": None, "disabled_documents": None}
        try:
            st = rt.index(name).stats()
            facts.update(documents=st.documents, chunks=st.chunks, commit=st.commit, last_commit=st.last_commit,
                         disabled_documents=disabled_count(rt, name))
            state = Path(rt.indexes.folder(name)) / SYNC_STATE
            if state.exists():
                facts["last_sync"] = state.stat().st_mtime
        except (DependencyUnavailable, OSError, ValueError):
            pass
        out[name] = facts
    return out


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


async def _questions(asked: QuestionCounts, ids: list[str]) -> tuple[dict[str, Any], dict[str, int]]:
    days, counts = await asked.per_day()
    total, no, low = [], [], []
    per_route: Counter[str] = Counter()
    for d in days:
        c = counts.get(d, Counter())
        total.append(sum(c.values()))
        no.append(sum(n for (_, o), n in c.items() if o == "no_answer"))
        low.append(sum(n for (_, o), n in c.items() if o == "low_score"))
        for (label, _outcome), n in c.items():
            for rid in label.split(","):
                if rid in ids:
                    per_route[rid] += n
    return ({"days": days, "total": total, "no_answer": no, "low_score": low,
             "no_answer_rate": [_rate(n, t) for n, t in zip(no, total, strict=True)],
             "low_score_rate": [_rate(n, t) for n, t in zip(low, total, strict=True)],
             "shared": asked.store.shared}, dict(per_route))


async def _keys(config: Config, usage: KeyUsage, now: float) -> list[dict[str, Any]]:
    out = []
    for tenant, t in sorted(config.tenants.items()):
        used = await usage.read(tenant, [k.id for k in t.secrets])
        for k in t.secrets:
            u = used.get(k.id)
            out.append({"tenant": tenant, "key_id": k.id, "live": k.live(now), "not_after": k.not_after,
                        "last_used": u.last if u else None, "count": u.count if u else 0})
    return out


async def _refused(config: Config, log: DeliveryLog, now: float) -> dict[str, Any]:
    """Refused deliveries (outcome not 'ok') received in the last hour, by reason, from the
    deliveries record (its last admin.keep_deliveries per tenant: `scanned` says how many were read)."""
    rows: list[dict[str, Any]] = []
    for tenant in sorted(config.tenants):
        rows += await log.recent(tenant, config.admin.keep_deliveries)
    recent = [r for r in rows if (r.get("received_at") or 0) >= now - HOUR]
    by = Counter(str(r.get("outcome")) for r in recent if r.get("outcome") != "ok")
    return {"by_reason": dict(by.most_common()), "total": sum(by.values()), "scanned": len(rows)}


async def overview(rt: Runtime, asked: QuestionCounts, usage: KeyUsage, log: DeliveryLog) -> dict[str, Any]:
    """The overview (module doc). Never raises for a record that cannot be read: it is named in
    "errors" and its part left empty."""
    cfg = rt.config
    now = rt.clock.now()
    states = await run_in_threadpool(route_states, rt)
    names = sorted({s.index for s in states})
    facts = await run_in_threadpool(_index_facts, rt, names)
    errors: list[str] = []
    ids = [route_id(s) for s in states]
    try:
        questions, per_route = await _questions(asked, ids)
    except DependencyUnavailable:
        questions, per_route = {"days": [], "total": [], "no_answer": [], "low_score": [], "no_answer_rate": [],
                                "low_score_rate": [], "shared": True}, {}
        errors.append(_("question counts (Redis)"))
    routes = [{"kind": s.kind, "route": s.route, "id": route_id(s), "index": s.index, "state": s.state,
               "problem": s.problem, "commit": s.commit, "callers": callers(cfg, s),
               "questions": per_route.get(route_id(s), 0)} for s in states]
    try:
        keys = await _keys(cfg, usage, now)
    except (DependencyUnavailable, RedisError, OSError, TimeoutError):
        keys = []
        errors.append(_("key usage (Redis)"))
    try:
        refused = await _refused(cfg, log, now)
    except DependencyUnavailable:
        refused = {"by_reason": {}, "total": 0, "scanned": 0}
        errors.append(_("deliveries record (Redis)"))
    keyless = [{"tenant": name, "line": line} for name, line in keyless_tenants(rt)]
    return {"routes": routes, "indexes": facts, "questions": questions, "keys": keys, "keyless": keyless,
            "refused_last_hour": refused, "window_days": cfg.gaps.keep_days, "now": now, "errors": errors}
