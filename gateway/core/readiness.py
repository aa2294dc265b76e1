"""What each route of this worker can serve, and whether the replica is ready.

Rationale: docs/design-notes.md, "gateway/core/readiness.py".
"""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core.errors import DependencyUnavailable
from gateway.core.runtime import Runtime
from indexes.errors import IndexStoreError, IndexUnavailableError

STATES = ("ok", "stale", "warming", "unavailable", "disabled")


@dataclass(frozen=True, slots=True)
class RouteState:
    """One route's state in this worker.

    kind: "tenant" | "agent". route: "TENANT FIRST/SECOND" for a tenant route (the console's
    ids), the route's name for an agent route. index: the index it names. state: one of
    STATES. problem: what is wrong on disk in a few words ("missing on disk", "damaged on
    disk", `IndexStoreError.reason`), "cannot be opened" when only the worker fails, None when ok.
    commit: the commit its index's reader in this worker shows ('{opstamp}-{12 hex}'), None when
    it does not open (or is disabled).
    """

    kind: str
    route: str
    index: str
    state: str
    problem: str | None = None
    commit: str | None = None

    def __post_init__(self) -> None:
        if self.state not in STATES:
            raise ValueError(f"state must be one of {STATES}, not {self.state!r}")

    @property
    def serves(self) -> bool:
        """The route's callers are answered from its index right now (ok or stale)."""
        return self.state in ("ok", "stale")

    @property
    def label(self) -> str:
        """'route acme a/b' or 'agent route wiki': how a problem line names the route."""
        return f"route {self.route}" if self.kind == "tenant" else f"agent route {self.route}"

    def as_json(self) -> dict[str, str | None]:
        """{"kind", "route", "index", "state", "problem", "commit"}: one entry of /readyz's "routes"."""
        return {"kind": self.kind, "route": self.route, "index": self.index, "state": self.state,
                "problem": self.problem, "commit": self.commit}


def disk_problem(rt: Runtime, name: str) -> str | None:
    """What is wrong with index `name` in a few words without paths ('missing on disk',
    'damaged on disk', …: `IndexStoreError.reason`; 'unreachable' for an index served by an
    engine that does not answer), or None when its folder opens afresh or its engine answers
    (`IndexStore.check`, blocking: about 1-2 ms an index on disk, one call to an engine)."""
    try:
        rt.indexes.check(name)
    except IndexUnavailableError as exc:
        return exc.reason
    except IndexStoreError as exc:
        return f"{exc.reason} on disk"
    except OSError:
        return "unreadable on disk"
    return None


def route_states(rt: Runtime) -> list[RouteState]:
    """Every tenant route (sorted by tenant, then ids) and every agent route (by name) of
    `rt.config`, with its state. Blocking (opens indexes, checks their folders: run it in a
    thread from async code). Never raises for a broken index."""
    cfg = rt.config
    wanted: list[tuple[str, str, str, bool]] = []
    for t in sorted(cfg.tenants.values(), key=lambda t: t.name):
        for r in sorted(t.routes, key=lambda r: (r.first_level_id, r.second_level_id)):
            wanted.append(("tenant", f"{t.name} {r.first_level_id}/{r.second_level_id}", r.index, True))
    for name, ar in sorted(cfg.agent.routes.items()):
        wanted.append(("agent", name, ar.index, ar.enabled))
    on_disk: dict[str, str | None] = {}
    opens: dict[str, str | None | bool] = {}  # index → its reader's commit label, or False
    warming: set[str] = set()
    out = []
    for kind, route, index, enabled in wanted:
        if not enabled:  # a disabled route answers without searching: its index may come later
            out.append(RouteState(kind, route, index, "disabled"))
            continue
        if index not in on_disk:
            on_disk[index] = disk_problem(rt, index)
            try:
                opened = rt.index(index)
                opens[index] = opened.commit  # reloaded first when a commit landed
                if not opened.model_ready:
                    warming.add(index)
            except DependencyUnavailable:
                opens[index] = False
        disk = on_disk[index]
        problem = disk or None
        commit = opens[index]
        if commit is False or disk == IndexUnavailableError.reason:  # an engine down: nothing to answer from
            out.append(RouteState(kind, route, index, "unavailable", problem or "cannot be opened"))
        else:
            assert not isinstance(commit, bool)
            state = "stale" if disk else "warming" if index in warming else "ok"
            out.append(RouteState(kind, route, index, state, problem or (
                "loading its embedding model" if state == "warming" else None), commit))
    return out


def vector_notes(rt: Runtime) -> list[str]:
    """One line per routed index that is lexical only because it was built before hybrid was
    the default (`DenseChoices.unembedded`), saying how to add its vectors (/readyz "notes",
    `check-config`). A note never makes the replica unready: the index serves lexically."""
    from indexes.dense.config import DenseChoices

    choices = DenseChoices.of(rt.config.dense)
    return [choices.embed_step(name, rt.config.source) for name in rt.routed_indexes()
            if choices.unembedded(name, rt.indexes.root / name)]


def keyless_tenants(rt: Runtime) -> list[tuple[str, str]]:
    """(tenant, the line saying so) for each tenant of `rt.config` with no key that verifies now
    (none configured, or every one past its not_after), sorted by name: every signed callback
    of it is refused (Ret 40105), or answered unsigned while it reports. A line for /readyz's
    "notes" and a red line on the console's overview; never unready (the other tenants serve)."""
    now = rt.clock.now()
    out = []
    for t in sorted(rt.config.tenants.values(), key=lambda t: t.name):
        if any(k.live(now) for k in t.secrets):
            continue
        if t.mode(now) == "report":
            effect = "it answers unsigned callbacks while it reports, then refuses every callback (40105)"
        else:
            effect = "every callback is refused (Ret 40105)"
        out.append((t.name, f"tenant {t.name} has no key that verifies: {effect}; add one: "
                             f"kbgate secrets add --tenant {t.name} (or the console's Tenants page)"))
    return out


def is_ready(states: list[RouteState], mode: str, replay_answers: bool) -> bool:
    """The readiness rule of `mode` ("any" | "all", `server.readiness`; module doc) over the
    routes' `states`, given whether the replay store answered PING."""
    if not replay_answers:
        return False
    enabled = [s for s in states if s.state != "disabled"]
    if any(s.state == "warming" for s in enabled):
        return False  # its answers would be lexical without anyone knowing
    if mode == "all":
        return all(s.state == "ok" for s in enabled)
    return not enabled or any(s.serves for s in enabled)


def problem_lines(states: list[RouteState]) -> list[str]:
    """One sorted line per broken route, and one per route that serves from a stale copy, each
    naming its route:

    - "route acme a/b: index kb unavailable (missing on disk)": its callbacks get 503 50302;
    - "agent route wiki: index w unavailable (damaged on disk)": the same for an agent route;
    - "route acme a/b: index kb damaged on disk; answers come from the copy opened before": the
      route is answered by this worker only (a worker that starts now cannot open it).
    """
    lines = set()
    for s in states:
        if s.state == "unavailable":
            why = f" ({s.problem})" if s.problem != "cannot be opened" else ""
            lines.add(f"{s.label}: index {s.index} unavailable{why}")
        elif s.state == "warming":
            lines.add(f"{s.label}: index {s.index} is loading its embedding model (not ready until it answers)")
        elif s.state == "stale":
            lines.add(f"{s.label}: index {s.index} {s.problem}; answers come from the copy opened before")
    return sorted(lines)
