"""Prometheus metrics, correct under several hypercorn workers.

Rationale: docs/design-notes.md, "gateway/ops/metrics.py".
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import ParamSpec

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    multiprocess,
    values,
)
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from gateway.core.audit import AuditEvent
from gateway.core.events import AnswerLooked, Delivery, HybridSearched, Reranked
from indexes.types import IndexStats

log = logging.getLogger("kbgate.metrics")
P = ParamSpec("P")


def _never_raises(update: Callable[P, None]) -> Callable[P, None]:
    """A metrics update that logs its own failure instead of raising: metrics never fail a
    request, a search or a reload."""
    @functools.wraps(update)
    def quiet(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            update(*args, **kwargs)
        except Exception:
            log.warning("metrics update failed", exc_info=True)
    return quiet

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Seconds. The callback is answered from local mmap'd indexes: most land well under 50 ms.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
RESULT_BUCKETS = (0, 1, 2, 3, 5, 10, 20, 50, 100)


def multiprocess_dir() -> str | None:
    """The folder prometheus-client shares between workers, or None (single process)."""
    return os.environ.get(MULTIPROC_ENV) or None


OWN_DIR_PREFIX = "kbgate-metrics-"


def prepare_multiprocess_dir() -> tuple[str, bool]:
    """Point PROMETHEUS_MULTIPROC_DIR at an empty folder before hypercorn spawns workers.

    Returns (folder, created): a fresh temp folder named after this process's pid
    (created=True, the caller removes it at exit; the folders of servers that died without
    removing theirs, kill -9 or the OOM killer, are removed first), or the operator's own
    folder with stale *.db files removed (created=False), as prometheus-client requires a
    folder wiped between runs.
    """
    given = multiprocess_dir()
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
        return given, False
    remove_orphaned_dirs(Path(tempfile.gettempdir()))
    folder = tempfile.mkdtemp(prefix=f"{OWN_DIR_PREFIX}{os.getpid()}-")
    os.environ[MULTIPROC_ENV] = folder
    return folder, True


def remove_orphaned_dirs(tmp: Path) -> list[Path]:
    """Remove the folders `prepare_multiprocess_dir` made in `tmp` for a process that no longer
    exists ('kbgate-metrics-<pid>-*'); a live or unknowable owner (another user's) keeps its own.
    Returns the folders removed."""
    gone = []
    for folder in tmp.glob(f"{OWN_DIR_PREFIX}*-*"):
        pid = folder.name[len(OWN_DIR_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or not folder.is_dir() or _alive(int(pid)):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        gone.append(folder)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's process
        return True
    return True


def _pin_process_identifier() -> None:
    """Make the multiprocess values of metrics created from now on identify this process by
    the pid it has now, not by calling `os.getpid()` on every update (prometheus-client's
    default, which re-checks for a fork: ~2% of a TiDB callback's CPU in `make bench`'s
    profile). Safe because kbgate's workers are spawned, never forked after their metrics
    exist (`gateway.serve.master`). Uses the library's own hook, `MultiProcessValue`."""
    pid = os.getpid()
    if getattr(values.ValueClass, "_kbgate_pid", None) != pid:
        value_class = values.MultiProcessValue(process_identifier=lambda: pid)  # type: ignore[no-untyped-call]
        value_class._kbgate_pid = pid
        values.ValueClass = value_class


def remove_multiprocess_dir(folder: str) -> None:
    """Remove a folder made by `prepare_multiprocess_dir` (ignore errors: best effort)."""
    shutil.rmtree(folder, ignore_errors=True)


class IndexCollector(Collector):
    """Gauges read at scrape time: per index documents, chunks, generation, last commit, and
    `kbgate_index_commit_info{index,commit}` (1; the commit's label: compare replicas).

    stats(): yields (index name, IndexStats or None when the index cannot be opened).
    """

    def __init__(self, stats: Callable[[], Iterable[tuple[str, IndexStats | None]]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        up = GaugeMetricFamily("kbgate_index_up", "1 when the index opens, else 0", labels=["index"])
        docs = GaugeMetricFamily("kbgate_index_documents", "Documents in the index", labels=["index"])
        chunks = GaugeMetricFamily("kbgate_index_chunks", "Chunks (Tantivy docs) in the index", labels=["index"])
        gen = GaugeMetricFamily("kbgate_index_generation", "Commit opstamp of the open index", labels=["index"])
        last = GaugeMetricFamily("kbgate_index_last_commit_timestamp_seconds",
                                 "Unix time of the index's last commit", labels=["index"])
        commit = GaugeMetricFamily("kbgate_index_commit_info", "1, labelled with the commit the index holds "
                                   "('{opstamp}-{12 hex}', equal on every replica serving it)",
                                   labels=["index", "commit"])
        try:
            items = list(self._stats())
        except Exception:  # a scrape must never fail because an index is broken
            log.warning("index stats failed", exc_info=True)
            items = []
        for name, s in items:
            up.add_metric([name], 0.0 if s is None else 1.0)
            if s is None:
                continue
            docs.add_metric([name], float(s.documents))
            chunks.add_metric([name], float(s.chunks))
            gen.add_metric([name], float(s.generation))
            if s.last_commit is not None:
                last.add_metric([name], float(s.last_commit))
            if s.commit is not None:
                commit.add_metric([name, s.commit], 1.0)
        yield from (up, docs, chunks, gen, last, commit)


# One route's readiness at scrape time: (kind "tenant" | "agent", route, index, ready); a
# disabled agent route is left out (gateway.core.readiness.RouteState).
RouteReady = tuple[str, str, str, bool]


class RouteCollector(Collector):
    """`kbgate_route_ready{kind,route,index}`: 1 while the route's index opens in the answering
    worker and on disk ("ok" in /readyz), else 0 ("unavailable", or "stale": answered from the
    copy opened before, which a restarted worker would not have). routes(): yields RouteReady."""

    def __init__(self, routes: Callable[[], Iterable[RouteReady]]) -> None:
        self._routes = routes

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ready = GaugeMetricFamily("kbgate_route_ready", "1 when the route's index opens in this worker and on disk",
                                  labels=["kind", "route", "index"])
        try:
            items = list(self._routes())
        except Exception:  # a scrape must never fail because a route is broken
            log.warning("route states failed", exc_info=True)
            items = []
        for kind, route, index, ok in items:
            ready.add_metric([kind, route, index], 1.0 if ok else 0.0)
        yield ready


class Metrics:
    """The gateway's metrics. One per Runtime; `observe` is called once per callback.

    Names (all prefixed kbgate_): callbacks_total{tenant,outcome},
    callback_signatures_total{tenant,signature}, callback_duration_seconds{tenant},
    search_duration_seconds{tenant}, callback_results{tenant},
    key_verifications_total{tenant,key_id}, nonce_store_errors_total{tenant},
    deliveries_dropped_total{reason}, hybrid_searches_total{index,outcome},
    answer_cache_lookups_total{index,outcome} (outcome 'hit' | 'miss'),
    rerank_calls_total{index,outcome} and rerank_duration_seconds{index},
    questions_total{route,outcome} (`count_question`); per Bearer-token
    wing (`observe_call`): wing_requests_total{wing,outcome}, wing_errors_total{wing,code},
    wing_duration_seconds{wing}, config_reload_total{outcome} (outcome 'reloaded' |
    'rejected'); index gauges from `IndexCollector`, route_ready from `RouteCollector` when
    `routes` is given.
    """

    def __init__(self, index_stats: Callable[[], Iterable[tuple[str, IndexStats | None]]],
                 routes: Callable[[], Iterable[RouteReady]] | None = None) -> None:
        self.multiprocess = multiprocess_dir() is not None
        if self.multiprocess:
            _pin_process_identifier()
        # In multiprocess mode values live in files: metrics must not sit in the scrape
        # registry too (they would be counted twice), so they are created unregistered.
        self._own: CollectorRegistry | None = None if self.multiprocess else CollectorRegistry()
        reg = self._own
        self.callbacks = Counter("kbgate_callbacks", "Callbacks answered, by tenant and outcome",
                                 ["tenant", "outcome"], registry=reg)
        self.signatures = Counter("kbgate_callback_signatures", "Callbacks by signature state "
                                  "(verified, unsigned, failed, unchecked)", ["tenant", "signature"], registry=reg)
        self.latency = Histogram("kbgate_callback_duration_seconds", "Time from request to response built",
                                 ["tenant"], buckets=LATENCY_BUCKETS, registry=reg)
        self.search = Histogram("kbgate_search_duration_seconds", "Time spent in the index search",
                                ["tenant"], buckets=LATENCY_BUCKETS, registry=reg)
        self.results = Histogram("kbgate_callback_results", "Result items returned per answered callback",
                                 ["tenant"], buckets=RESULT_BUCKETS, registry=reg)
        self.keys = Counter("kbgate_key_verifications", "Signatures verified, by key id",
                            ["tenant", "key_id"], registry=reg)
        self.nonce_errors = Counter("kbgate_nonce_store_errors", "Replay store did not answer (fail closed)",
                                    ["tenant"], registry=reg)
        self.dropped = Counter("kbgate_deliveries_dropped", "Delivery records not kept (writer behind, Redis error)",
                               ["reason"], registry=reg)
        self.hybrid = Counter("kbgate_hybrid_searches", "Searches of hybrid indexes: outcome 'hybrid' used the "
                              "vectors, any other is why it answered lexically", ["index", "outcome"], registry=reg)
        self.answers = Counter("kbgate_answer_cache_lookups", "Lookups in the answer cache (search."
                               "answer_cache_entries > 0): 'hit' answered from memory, 'miss' searched",
                               ["index", "outcome"], registry=reg)
        self.rerank = Counter("kbgate_rerank_calls", "Calls of an index's rerank stage: outcome 'reranked' used "
                              "the reranker's order, any other is why the order before was kept",
                              ["index", "outcome"], registry=reg)
        self.rerank_latency = Histogram("kbgate_rerank_duration_seconds", "Time the rerank stage took (any outcome)",
                                        ["index"], buckets=LATENCY_BUCKETS, registry=reg)
        self.wing_requests = Counter("kbgate_wing_requests", "Calls of a Bearer-token wing (agent, dify, mcp, "
                                     "documents), by outcome (passed, partial, denied, failed)", ["wing", "outcome"],
                                     registry=reg)
        self.wing_errors = Counter("kbgate_wing_errors", "Calls of a Bearer-token wing answered with an error code",
                                   ["wing", "code"], registry=reg)
        self.questions = Counter("kbgate_questions", "Callers' questions by route and outcome: 'answered', "
                                 "'no_answer' (no hit) or 'low_score' (best relevance under the route's gap "
                                 "threshold); the no-answer and low-score rates per route are their shares",
                                 ["route", "outcome"], registry=reg)
        self.wing_latency = Histogram("kbgate_wing_duration_seconds", "Time from request to answer built, per wing",
                                      ["wing"], buckets=LATENCY_BUCKETS, registry=reg)
        self.reloads = Counter("kbgate_config_reload", "Loads of a changed config file by a worker: 'reloaded' "
                               "swapped it in, 'rejected' kept the running config (logged naming the key)",
                               ["outcome"], registry=reg)
        if self.multiprocess:
            self._scrape = CollectorRegistry()
            multiprocess.MultiProcessCollector(self._scrape)  # type: ignore[no-untyped-call]  # untyped library
        else:
            assert self._own is not None
            self._scrape = self._own
        self._scrape.register(IndexCollector(index_stats))
        if routes is not None:
            self._scrape.register(RouteCollector(routes))

    @_never_raises
    def count_reload(self, outcome: str) -> None:
        """Count one config load of this worker ('reloaded' | 'rejected'). Never raises."""
        self.reloads.labels(outcome).inc()

    @_never_raises
    def observe(self, d: Delivery) -> None:
        """Count one callback (after its response was sent). Never raises."""
        t = d.tenant
        self.callbacks.labels(t, d.outcome).inc()
        self.signatures.labels(t, d.signature).inc()
        self.latency.labels(t).observe(d.latency_ms / 1000.0)
        if d.search_ms is not None:
            self.search.labels(t).observe(d.search_ms / 1000.0)
            self.results.labels(t).observe(d.results)
        if d.key_id is not None and d.signature == "verified":
            self.keys.labels(t, d.key_id).inc()
        if d.outcome == "replay_store_unavailable":
            self.nonce_errors.labels(t).inc()

    @_never_raises
    def observe_hybrid(self, e: HybridSearched) -> None:
        """Count one search of a hybrid index by its outcome (any thread). Never raises."""
        self.hybrid.labels(e.index, e.outcome).inc()

    def hybrid_outcomes(self) -> dict[str, dict[str, int]]:
        """index → outcome ('hybrid', or why a search answered lexically: 'timeout', 'breaker_open',
        'error', 'stale', ...) → searches, summed over every worker since the server started."""
        out: dict[str, dict[str, int]] = {}
        for family in self._scrape.collect():
            if family.name != "kbgate_hybrid_searches":
                continue
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    index, outcome = sample.labels.get("index", ""), sample.labels.get("outcome", "")
                    per = out.setdefault(index, {})
                    per[outcome] = per.get(outcome, 0) + int(sample.value)
        return out

    @_never_raises
    def observe_rerank(self, e: Reranked) -> None:
        """Count one rerank call by its outcome, and its time (any thread). Never raises."""
        self.rerank.labels(e.index, e.outcome).inc()
        self.rerank_latency.labels(e.index).observe(e.duration_ms / 1000.0)

    @_never_raises
    def observe_answer(self, e: AnswerLooked) -> None:
        """Count one answer cache lookup by its outcome (any thread). Never raises."""
        self.answers.labels(e.index, e.outcome).inc()

    @_never_raises
    def observe_call(self, e: AuditEvent) -> None:
        """Count one call of a Bearer-token wing (after its audit line). Never raises."""
        self.wing_requests.labels(e.wing, e.outcome).inc()
        self.wing_latency.labels(e.wing).observe(e.duration_ms / 1000.0)
        if e.code is not None:
            self.wing_errors.labels(e.wing, e.code).inc()

    @_never_raises
    def count_question(self, route: str, outcome: str) -> None:
        """Count one caller's question (gateway.console.gaps.record: route ids joined by ',',
        configured names only; outcome 'answered' | 'no_answer' | 'low_score'). Never raises."""
        self.questions.labels(route, outcome).inc()

    def drop(self, reason: str, count: int) -> None:
        """Count delivery records dropped for `reason` ('overflow' | 'redis_error')."""
        self.dropped.labels(reason).inc(count)

    def exposition(self) -> bytes:
        """The Prometheus text exposition of every worker (multiprocess) or of this one."""
        return generate_latest(self._scrape)

    def close(self) -> None:
        """Mark this worker dead so its live gauges leave the multiprocess files."""
        if self.multiprocess:
            multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]  # untyped library

    async def aclose(self) -> None:
        """`close`, for the worker's shutdown (Runtime.on_close)."""
        self.close()


async def endpoint(request: Request) -> Response:
    """GET /metrics: the Prometheus text exposition of every worker (the app's `Metrics`)."""
    metrics: Metrics = request.app.state.metrics
    body = await run_in_threadpool(metrics.exposition)  # index stats touch the disk
    return Response(body, media_type=CONTENT_TYPE, headers={"cache-control": "no-store"})
