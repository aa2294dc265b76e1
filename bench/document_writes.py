"""What the document API's writes cost, and what they cost the callbacks served meanwhile
: `python -m bench.document_writes [--writes N] [--seconds S] [--workers W]`.

Rationale: docs/design-notes.md, "bench/document_writes.py".
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson

from bench.corpus import CORPORA
from bench.stack import CALLBACK_PATH, FIRST_LEVEL_ID, gateway_argv, throwaway_redis, write_routes_config
from gateway.ops.processes import Server, free_port, kbgate


def _ms(values: list[float]) -> str:
    if not values:
        return "-"
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return f"{statistics.median(ordered) * 1000:7.1f} {p95 * 1000:7.1f} {ordered[-1] * 1000:7.1f}"


BODY = "这是文档接口写入的一段正文，说明备份与恢复的步骤。" * 20


def _page(i: int, version: int = 0) -> dict[str, str]:
    return {"title": f"压测页面{i}", "content": f"第{i}篇第{version}版：{BODY}"}


def write_latency(base: str, token: str, n: int) -> list[tuple[str, list[float]]]:
    """Phase 1 (module doc): (label, seconds of each request)."""
    auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
    path = f"{base}/documents/v1/indexes/tidb"
    rows: list[tuple[str, list[float]]] = []
    with httpx.Client(timeout=120) as c:
        def timed(label: str, send: list[tuple[str, str, bytes | None]]) -> None:
            took = []
            for method, url, body in send:
                t0 = time.perf_counter()
                r = c.request(method, url, content=body, headers=auth)
                took.append(time.perf_counter() - t0)
                r.raise_for_status()
            rows.append((label, took))

        timed("PUT added", [("PUT", f"{path}/documents/w-{i}", orjson.dumps(_page(i))) for i in range(n)])
        timed("PUT unchanged (retry)", [("PUT", f"{path}/documents/w-{i}", orjson.dumps(_page(i))) for i in range(n)])
        timed("PUT updated", [("PUT", f"{path}/documents/w-{i}", orjson.dumps(_page(i, 1))) for i in range(n)])
        timed("DELETE", [("DELETE", f"{path}/documents/w-{i}", None) for i in range(n)])
        batches = [orjson.dumps({"upserts": [{"id": f"b-{k}-{i}", **_page(i)} for i in range(100)]})
                   for k in range(max(n // 10, 1))]
        timed("batch of 100 added", [("POST", f"{path}/batch", b) for b in batches])
    return rows


def callbacks_during_writes(base: str, token: str, secret: str, seconds: float, threads: int,
                            queries: list[str]) -> list[tuple[str, int, int, list[float]]]:
    """Phase 2 (module doc): (phase, requests, errors, seconds of each callback)."""
    counter = itertools.count()
    rows = []
    for phase in ("idle", "writing", "idle", "writing"):
        took, errors, writes = _phase(base, token, secret, seconds, threads, queries, counter, phase == "writing")
        rows.append((f"{phase} ({writes} writes)" if writes else phase, len(took), errors, took))
    return rows


def _phase(base: str, token: str, secret: str, seconds: float, threads: int, queries: list[str],
           counter: Iterator[int], writing: bool) -> tuple[list[float], int, int]:
    """One phase: (seconds of each callback, callbacks failed, writes made)."""
    from gateway.volcengine.signing import sign_headers

    stop = threading.Event()
    took: list[float] = []
    errors = [0]
    writes = [0]

    def ask() -> None:
        with httpx.Client(timeout=30) as c:
            while not stop.is_set():
                q = queries[next(counter) % len(queries)]
                body = orjson.dumps({"FirstLevelId": FIRST_LEVEL_ID, "SecondLevelId": "tidb", "Query": q, "Limit": 5})
                headers = {"Content-Type": "application/json", **sign_headers(secret, body, int(time.time()))}
                t0 = time.perf_counter()
                try:
                    r = c.post(base + CALLBACK_PATH, content=body, headers=headers)
                    ok = r.status_code == 200 and orjson.loads(r.content)["Ret"] == 0
                except httpx.HTTPError:
                    ok = False
                took.append(time.perf_counter() - t0)
                errors[0] += not ok

    def write() -> None:
        auth = {"authorization": f"Bearer {token}", "content-type": "application/json"}
        with httpx.Client(timeout=120) as c:
            while not stop.is_set():
                i = next(counter)
                c.put(f"{base}/documents/v1/indexes/tidb/documents/bg-{i % 50}", content=orjson.dumps(_page(i)),
                      headers=auth).raise_for_status()
                writes[0] += 1

    workers = [threading.Thread(target=ask) for _ in range(threads)]
    if writing:
        workers.append(threading.Thread(target=write))
    for t in workers:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in workers:
        t.join()
    return took, errors[0], writes[0]


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m bench.document_writes", description=__doc__.splitlines()[0])
    p.add_argument("--writes", type=int, default=50, help="requests of each write kind (default 50)")
    p.add_argument("--seconds", type=float, default=10.0, help="length of each callback phase (default 10)")
    p.add_argument("--threads", type=int, default=4, help="callback threads (default 4)")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args()
    queries = [orjson.loads(line)["query"] for line in (CORPORA / "tidb-docs-cn" / "queries.jsonl").read_bytes()
               .splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="kbgate-docwrites-") as tmp, throwaway_redis() as (redis_url, _):
        work = Path(tmp)
        port = free_port()
        cc = write_routes_config(work, work / "indexes", {"tidb": "tidb"}, port, args.workers, redis_url,
                                 grants=("documents.write",))
        t0 = time.perf_counter()
        built = kbgate("index", "add", "--config", str(cc.config), "--index", "tidb", "--no-progress",
                       str(CORPORA / "tidb-docs-cn" / "docs"), timeout=1200)
        print(f"index tidb built in {time.perf_counter() - t0:.1f} s: {built.stdout.strip()}")
        token, secret = cc.token_file.read_text().strip(), cc.secret_file.read_text().strip()
        with Server(gateway_argv(cc.config, args.workers), port, work / "serve.log", workers=args.workers) as srv:
            print(f"\nwrites, one at a time, answer after the commit ({args.writes} each)")
            print(f"{'kind':<24} {'median':>7} {'p95':>7} {'max':>7}  (ms)")
            for label, took in write_latency(srv.base, token, args.writes):
                print(f"{label:<24} {_ms(took)}")
            print(f"\nsigned callbacks, {args.threads} threads, {args.seconds:g} s a phase")
            print(f"{'phase':<24} {'requests':>8} {'errors':>6} {'median':>7} {'p95':>7} {'max':>7}  (ms)")
            for phase, n, errs, took in callbacks_during_writes(srv.base, token, secret, args.seconds, args.threads,
                                                               queries):
                print(f"{phase:<24} {n:>8} {errs:>6} {_ms(took)}")


if __name__ == "__main__":
    main()
