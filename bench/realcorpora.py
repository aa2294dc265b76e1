"""The phases on the real corpora: what users run, beside the floor, in one run.

Rationale: docs/design-notes.md, "bench/realcorpora.py".
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from bench.answercache import CacheSwitch
from bench.flame import parts_table, summarize
from bench.hugedoc import HUGE_ROUTE, huge_queries, huge_vs_normal
from bench.hybrid import EMBEDDED_MODEL, HYBRID_ROUTE, build_hybrid, lexical_beside_hybrid, need, wait_until_hybrid
from bench.measure import closed_loop, open_loop, worker_memory
from bench.phases import run_phase
from bench.stack import LEXICAL, floor_argv, gateway_argv, write_routes_config
from bench.versus import alternate, medians, minimal_argv, minimal_env
from bench.wings import WINGS, Wing, served_grants
from bench.workload import CORPUS_SOURCES, Stream, repeat_share, write_bodies
from bench.wrk import run_wrk
from gateway.core.config.model import DEFAULT_ANSWER_CACHE_ENTRIES
from gateway.ops.processes import Server, free_port

__all__ = ["add_arguments", "run_corpora"]

CALLBACK = WINGS[0]
_PROFILE_ROUTE = "tidb-docs-cn"


def _say(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def _bodies(work: Path, tag: str, wing: Wing, route: str, queries: list[str]) -> Path:
    path = work / f"bodies-{tag}.txt"
    write_bodies(path, (wing.body(route, q) for q in queries))
    return path


def _check(base: str, wing: Wing, route: str, query: str, secret: str) -> bytes:
    """One request through `wing`; its raw answer. Raises RuntimeError unless 200 and expected."""
    from gateway.volcengine.signing import sign_headers

    body = wing.body(route, query)
    headers = dict(wing.headers)
    headers["Content-Type"] = "application/json"
    if wing.auth == "hmac":
        headers.update(sign_headers(secret, body, int(time.time())))
    else:
        headers["Authorization"] = f"Bearer {secret}"
    r = httpx.post(base + wing.url_path(route), content=body, headers=headers, timeout=30.0)
    if r.status_code != 200 or not wing.expect(r.content):
        raise RuntimeError(f"{wing.name} on route {route}: {r.status_code} {r.text[:300]}")
    return r.content


def _profile(srv: Server, work: Path, out: Path, stream: Stream, secret_file: Path, seconds: float) -> str:
    """py-spy (raw collapsed stacks, native frames) of one worker under a TiDB closed loop."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists():
        return "(py-spy not installed: `.venv/bin/pip install py-spy`)"
    from bench.wrk import SCRIPT, wrk_path

    bodies = _bodies(work, "profile", CALLBACK, _PROFILE_ROUTE, stream.take(int(2_500 * (seconds + 2))))
    gen = subprocess.Popen([wrk_path(), "-t", "2", "-c", "32", "-d", f"{int(seconds + 2)}s", "-s", str(SCRIPT),
                            srv.base + CALLBACK.url_path(_PROFILE_ROUTE), "--", "hmac", str(bodies),
                            str(secret_file), "2", "prof"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    subprocess.run([spy, "record", "-r", "250", "-d", str(int(seconds)), "--native", "-f", "raw", "-o", str(out),
                    "--pid", str(srv.workers()[0])], capture_output=True, timeout=seconds + 60)
    gen.wait(seconds + 60)
    if not out.exists():
        return "(py-spy produced no profile; is ptrace allowed?)"
    return parts_table(out) + "\n\n" + summarize(out, 25)


def run_corpora(args: argparse.Namespace, work: Path, out_dir: Path, stamp: str, redis_url: str,
                redis_pid: int | None) -> dict[str, Any]:
    """All phases of the module docstring; the dict bench.report_corpora renders."""
    idx_dir = work / "indexes"
    limit = args.corpus_limit
    res: dict[str, Any] = {"indexes": {}, "closed": [], "open": [], "wings": [], "settings": {
        "connections": args.corpus_connections, "wrk_threads": 2, "seconds": args.seconds, "warmup": args.warmup,
        "open_rates": args.open_rates, "huge_chunks": args.huge_chunks, "workers": args.workers}}
    routes = {"cmrc2018": "cmrc2018", "tidb-docs-cn": "tidb-docs-cn", HUGE_ROUTE: HUGE_ROUTE}
    extra = ["--limit", str(limit)] if limit else []
    for corpus in CORPUS_SOURCES:
        _say(f"{corpus}: building the index")
        res["indexes"][corpus] = run_phase(["index", "--dir", str(idx_dir), "--index", corpus, "--corpus", corpus,
                                            *extra])
    _say(f"tidb-docs-cn plus one document of {args.huge_chunks:,} chunks: building the index")
    res["indexes"][HUGE_ROUTE] = run_phase(["index", "--dir", str(idx_dir), "--index", HUGE_ROUTE, "--corpus",
                                         "tidb-docs-cn", "--huge-chunks", str(args.huge_chunks), *extra])
    dense = {index: LEXICAL for index in routes.values()}  # every path named (bench.stack.dense_lines)
    if args.hybrid != LEXICAL:
        res["indexes"][HYBRID_ROUTE] = build_hybrid(args, idx_dir, embedding_cache(args), extra)
        routes[HYBRID_ROUTE], dense[HYBRID_ROUTE] = HYBRID_ROUTE, args.hybrid
    res["minimal_indexes"] = {}
    for corpus in CORPUS_SOURCES:
        _say(f"{corpus}: building the minimal gateway's index")
        res["minimal_indexes"][corpus] = run_phase(["minimal-index", "--dir", str(work / "minimal"), "--index", corpus,
                                                    "--corpus", corpus, *extra])
    per_phase = int(args.max_rps * (args.seconds + args.warmup))
    versus = args.versus_rounds * int(args.max_rps * (args.versus_seconds + args.warmup))
    streams = {c: Stream(c, 6 * per_phase + versus + 2_000 + (need(args) if c == "tidb-docs-cn" else 0), limit)
               for c in CORPUS_SOURCES}
    port = free_port()
    cc = write_routes_config(work, idx_dir, routes, port, args.workers, redis_url, grants=served_grants(),
                             answer_cache_entries=args.answer_cache, dense=dense)
    secret = cc.secret_file.read_text().strip()
    token = cc.token_file.read_text().strip()
    conns = args.corpus_connections
    res["settings"]["answer_cache"] = args.answer_cache
    res["settings"]["versus_rounds"], res["settings"]["versus_seconds"] = args.versus_rounds, args.versus_seconds
    mport = free_port()
    with Server(gateway_argv(cc.config, args.workers), port, work / "serve-corpora.log") as srv, \
            Server(minimal_argv(cc.config, mport, args.workers), mport, work / "minimal.log", workers=args.workers,
                   env=minimal_env(cc.secret_file, redis_url, work / "minimal")) as minimal:
        cache = CacheSwitch(srv, cc.config, args.workers, args.answer_cache)
        floor_bodies: dict[str, bytes] = {}
        for corpus, stream in streams.items():
            floor_bodies[corpus] = _check(srv.base, CALLBACK, corpus, stream.real[0], secret)
        for corpus, stream in streams.items():
            path = CALLBACK.url_path(corpus)
            _say(f"{corpus}: kbgate, closed loop, unique queries, {conns} connections, {args.seconds} s")
            warm = _bodies(work, f"{corpus}-warm", CALLBACK, corpus,
                           stream.take(int(args.max_rps * max(args.warmup, 0.1))))
            mine = stream.take(int(args.max_rps * args.seconds))
            r = cache.measured(corpus, partial(
                closed_loop, srv, path, _bodies(work, f"{corpus}-unique", CALLBACK, corpus, mine), cc.secret_file,
                mode="hmac", connections=conns, seconds=args.seconds, redis_pid=redis_pid),
                warm=partial(run_wrk, srv.base + path, warm, cc.secret_file, mode="hmac", connections=conns,
                             seconds=args.warmup) if args.warmup > 0 else None)
            res["closed"].append({"corpus": corpus, "server": "kbgate", "mix": "unique", "repeat_share": 0.0, **r})
            capacity = r["rps"]
            cache.switch(0)  # the cold path: every callback searched
            _versus(args, work, srv, minimal, corpus, stream, res, cc.secret_file, redis_pid)
            if corpus == "tidb-docs-cn" and HYBRID_ROUTE in routes:
                wait_until_hybrid(srv, secret, stream.real)
                res["hybrid"] = {"model": args.hybrid, "connections": args.hybrid_connections,
                                 **lexical_beside_hybrid(args, work, srv, stream, cc.secret_file, redis_pid)}
            z = stream.zipf(int(args.max_rps * args.seconds))
            zipf_bodies = _bodies(work, f"{corpus}-zipf", CALLBACK, corpus, z)
            for entries in (0, args.answer_cache) if args.answer_cache else (0,):
                cache.switch(entries)
                _say(f"{corpus}: kbgate, closed loop, Zipf mix, answer cache {'on' if entries else 'off'}")
                r = cache.measured(corpus, partial(closed_loop, srv, path, zipf_bodies, cc.secret_file, mode="hmac",
                                                   connections=conns, seconds=args.seconds, redis_pid=redis_pid))
                res["closed"].append({"corpus": corpus, "server": "kbgate", "mix": "zipf",
                                      "repeat_share": repeat_share(z[: r["requests"]]), **r})
            _say(f"{corpus}: the minimal gateway, closed loop, Zipf mix")
            r = closed_loop(minimal, path, zipf_bodies, cc.secret_file, mode="hmac", connections=conns,
                            seconds=args.seconds, redis_pid=redis_pid)
            res["closed"].append({"corpus": corpus, "server": "minimal", "mix": "zipf",
                                  "repeat_share": repeat_share(z[: r["requests"]]), **r})
            cache.switch(args.answer_cache)  # the configured state for the phases that follow
            rates = [(f, max(1.0, f * capacity)) for f in args.open_rates]
            for frac, rate in rates:
                _say(f"{corpus}: kbgate, open loop at {frac:.0%} of {capacity:,.0f} req/s = {rate:,.0f} req/s")
                qs = stream.take(int(rate * (args.seconds + args.warmup)) + 10)
                r = open_loop(srv, path, _bodies(work, f"{corpus}-open{frac}", CALLBACK, corpus, qs), cc.secret_file,
                              mode="hmac", rate=rate, seconds=args.seconds, warmup=args.warmup, redis_pid=redis_pid)
                res["open"].append({"corpus": corpus, "server": "kbgate", "fraction": frac, **r})
            res["open_rates_by_corpus"] = {**res.get("open_rates_by_corpus", {}), corpus: rates}
            _floor(args, work, cc.config, srv, corpus, floor_bodies[corpus], stream, rates, res, cc.secret_file,
                   redis_pid, ceiling=corpus == "tidb-docs-cn")
        _say(f"huge document: {args.huge_queries} queries, sequential, {args.huge_rounds} rounds, answer cache off")
        cache.switch(0)  # its rounds repeat the same queries: what they measure is the search
        res["huge"] = {"chunks": res["indexes"][HUGE_ROUTE]["huge_chunks"], "answer_cache": "off",
                       **huge_vs_normal(srv, secret, huge_queries(streams["tidb-docs-cn"], args.huge_queries,
                                                                  args.huge_chunks), args.huge_rounds)}
        cache.switch(args.answer_cache)
        tidb_cb = next(r for r in res["open"] if r["corpus"] == "tidb-docs-cn" and r["server"] == "kbgate")
        for wing in WINGS[1:]:
            res["wings"].append(_wing(args, work, srv, wing, streams["tidb-docs-cn"], token, cc.token_file,
                                      tidb_cb["offered_rps"], redis_pid))
        res["memory"] = worker_memory(srv)
        res["streams"] = {c: s.summary() for c, s in streams.items()}
        if args.profile:
            _say("py-spy on one worker under the TiDB closed loop")
            res["profile"] = _profile(srv, work, out_dir / f"pyspy-{stamp}-tidb.txt", streams["tidb-docs-cn"],
                                      cc.secret_file, args.profile_seconds)
            res["profile_file"] = str(out_dir / f"pyspy-{stamp}-tidb.txt")
    return res


def _versus(args: argparse.Namespace, work: Path, srv: Server, minimal: Server, corpus: str, stream: Stream,
            res: dict[str, Any], secret_file: Path, redis_pid: int | None) -> None:
    """kbgate (its answer cache off) and the minimal gateway alternating on the same unique
    callbacks, `--versus-rounds` rounds (bench.versus.alternate); each round's rows go to the
    closed-loop table, the medians to res['versus'][corpus]."""
    path = CALLBACK.url_path(corpus)
    n = int(args.max_rps * (args.versus_seconds + args.warmup))
    bodies = [_bodies(work, f"{corpus}-versus{r}", CALLBACK, corpus, stream.take(n))
              for r in range(args.versus_rounds)]
    _say(f"{corpus}: kbgate (answer cache off) and the minimal gateway, {args.versus_rounds} rounds alternating")
    rows = alternate([("kbgate", srv), ("minimal", minimal)], path, bodies, secret_file,
                     connections=args.corpus_connections, seconds=args.versus_seconds,
                     warmup=min(args.warmup, 0.5), redis_pid=redis_pid)
    for server, runs in rows.items():
        for r in runs:
            res["closed"].append({"corpus": corpus, "server": server, "mix": "unique", "repeat_share": 0.0,
                                  **({"cache": "off"} if server == "kbgate" else {}), **r})
    res.setdefault("versus", {})[corpus] = {server: medians(runs) for server, runs in rows.items()}


def _floor(args: argparse.Namespace, work: Path, config: Path, srv: Server, corpus: str, answer: bytes,
           stream: Stream, rates: list[tuple[float, float]], res: dict[str, Any], secret_file: Path,
           redis_pid: int | None, ceiling: bool) -> None:
    """The floor for `corpus` (answering its real answer bytes) under the same loads."""
    body = work / f"floor-body-{corpus}.json"
    body.write_bytes(answer)
    port = free_port()
    path = CALLBACK.url_path(corpus)
    with Server(floor_argv(config, port, args.workers), port, work / f"floor-{corpus}.log",
                env={"BENCH_FLOOR_BODY": str(body)}) as flr:
        _say(f"{corpus}: floor, closed loop, {args.corpus_connections} connections")
        # The floor ignores the query: it may reuse the kbgate phases' bodies.
        bodies = work / f"bodies-{corpus}-unique.txt"
        r = closed_loop(flr, path, bodies, secret_file, mode="hmac", connections=args.corpus_connections,
                        seconds=args.seconds, redis_pid=redis_pid, warmup_bodies=bodies, warmup=args.warmup)
        res["closed"].append({"corpus": corpus, "server": "floor", "mix": "-", "repeat_share": None, **r})
        for frac, rate in rates:
            _say(f"{corpus}: floor, open loop at {rate:,.0f} req/s")
            o = open_loop(flr, path, bodies, secret_file, mode="hmac", rate=rate, seconds=args.seconds,
                          warmup=args.warmup, redis_pid=redis_pid)
            res["open"].append({"corpus": corpus, "server": "floor", "fraction": frac, **o})
        if ceiling and args.ceiling_rates:
            res["ceiling"] = _ceiling(args, flr, path, bodies, secret_file, redis_pid)
        res.setdefault("floor_memory", {})[corpus] = worker_memory(flr)


CEILING_LAG_MS = 5.0
"""The open-loop generator keeps a rate when its own lag p99 stays under this, nothing fails,
and at least 95% of the offered rate is answered."""


def _ceiling(args: argparse.Namespace, flr: Server, path: str, bodies: Path, secret_file: Path,
             redis_pid: int | None) -> dict[str, Any]:
    """The open-loop generator against the floor at rising rates (3 s each) until it, or the
    floor, no longer keeps up; `kept` is the highest rate kept (a lower bound of the
    generator's ceiling on this machine at that moment)."""
    steps: list[dict[str, Any]] = []
    kept = None
    for rate in args.ceiling_rates:
        _say(f"open-loop generator ceiling: {rate:,.0f} req/s offered to the floor")
        o = open_loop(flr, path, bodies, secret_file, mode="hmac", rate=rate, seconds=min(3.0, args.seconds),
                      warmup=min(0.5, args.warmup), redis_pid=redis_pid)
        o["generator_us_per_req"] = 1e6 * o["cpu_s"] / max(1, o["sent"])
        o["kept"] = (o["lag_p99_ms"] <= CEILING_LAG_MS and not o["errors"] and not o["non_2xx"]
                     and o["achieved_rps"] >= 0.95 * rate)
        steps.append(o)
        if not o["kept"]:
            break
        kept = rate
    return {"steps": steps, "kept": kept, "lag_ms": CEILING_LAG_MS}


def _wing(args: argparse.Namespace, work: Path, srv: Server, wing: Wing, stream: Stream, token: str,
          token_file: Path, rate: float, redis_pid: int | None) -> dict[str, Any]:
    """Closed and open loop through one more wing on the TiDB index; 'not served' rows as such.
    rate: the callback's open-loop rate (its `--open-rates` first fraction); a wing whose own
    closed-loop req/s is lower is offered that fraction of its own instead."""
    route = "tidb-docs-cn"
    row: dict[str, Any] = {"wing": wing.name, "path": wing.url_path(route), "served": wing.served,
                           "issue": wing.issue}
    if not wing.served:
        return row
    try:
        _check(srv.base, wing, route, stream.real[0], token)
    except (RuntimeError, httpx.HTTPError, ValueError) as exc:
        row.update(served=False, issue=f"check failed: {exc}"[:200])
        return row
    _say(f"{wing.name}: closed loop and open loop at {rate:,.0f} req/s")
    path = wing.url_path(route)
    mode = wing.auth

    def bodies(tag: str, n: int) -> Path:
        return _bodies(work, f"wing-{tag}-{abs(hash(wing.name)) % 10**6}", wing, route, stream.take(n))

    row["closed"] = closed_loop(srv, path, bodies("closed", int(args.max_rps * args.seconds)), token_file, mode=mode,
                                connections=args.corpus_connections, seconds=args.seconds, redis_pid=redis_pid,
                                headers=wing.headers)
    # a wing slower than the callback is offered its own share, not one beyond its capacity
    rate = min(rate, max(1.0, args.open_rates[0] * row["closed"]["rps"]))
    row["open"] = open_loop(srv, path, bodies("open", int(rate * (args.seconds + args.warmup)) + 10), token_file,
                            mode=mode, rate=rate, seconds=args.seconds, warmup=args.warmup, redis_pid=redis_pid,
                            headers=wing.headers)
    return row


def embedding_cache(args: argparse.Namespace) -> Path:
    """The embedding cache of hybrid builds: outside the scratch folder each run empties."""
    return Path(args.embedding_cache or Path(args.out) / "embedding-cache").resolve()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The corpus phases' options."""
    p.add_argument("--no-corpora", action="store_true", help="skip the real-corpus phases (scale study only)")
    p.add_argument("--corpus-connections", type=int, default=32, help="closed-loop connections (default 32)")
    p.add_argument("--open-rates", type=lambda s: [float(x) for x in s.split(",")], default=[0.5, 0.8],
                   help="open-loop offered rates as fractions of kbgate's closed-loop req/s (default 0.5,0.8)")
    p.add_argument("--ceiling-rates", type=lambda s: [float(x) for x in s.split(",") if x],
                   default=[250.0, 500.0, 1000.0, 2000.0, 4000.0],
                   help="rising offered req/s for the open-loop generator's ceiling against the floor ('' skips)")
    p.add_argument("--max-rps", type=float, default=2500.0,
                   help="req/s a closed loop is expected not to exceed: sizes each phase's unique-query slice")
    p.add_argument("--answer-cache", type=int, default=DEFAULT_ANSWER_CACHE_ENTRIES,
                   help="answer cache entries per worker when on (default: the gateway's, "
                        f"{DEFAULT_ANSWER_CACHE_ENTRIES}); 0: off throughout, the Zipf mix once")
    p.add_argument("--huge-chunks", type=int, default=35_000, help="chunks of the one huge document (default 35000)")
    p.add_argument("--huge-queries", type=int, default=200, help="queries of the huge-document comparison")
    p.add_argument("--huge-rounds", type=int, default=3, help="rounds of the huge-document comparison")
    p.add_argument("--profile-seconds", type=float, default=6.0, help="py-spy seconds with --profile")
    p.add_argument("--versus-rounds", type=int, default=2,
                   help="rounds of kbgate (cache off) alternating with the minimal gateway (default 2)")
    p.add_argument("--versus-seconds", type=float, default=5.0,
                   help="measured seconds of each of those runs (default 5)")
    p.add_argument("--hybrid", default=EMBEDDED_MODEL,
                   help=f"the embedded model of the hybrid path measured beside the lexical one on the TiDB docs "
                        f"(default {EMBEDDED_MODEL}; 'none' skips it)")
    p.add_argument("--hybrid-connections", type=int, default=2,
                   help="closed-loop connections of the lexical-beside-hybrid rounds and of the hybrid scale study "
                        "(default 2, one callback per worker: a hybrid search whose query embedding waits behind "
                        "others past its deadline answers lexically, which 8 connections did on a loaded machine)")
    p.add_argument("--embedding-cache", default=None,
                   help="folder of the embedding cache kept between runs (default OUT/embedding-cache)")
    p.add_argument("--corpus-limit", type=int, default=None, help=argparse.SUPPRESS)  # smoke runs: first N docs
