"""`python -m bench.offload`: what `gateway.core.retrieve.search` costs now that it is a coroutine.

Rationale: docs/design-notes.md, "bench/offload.py".
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop
from anyio import to_thread

from gateway.core import retrieve
from gateway.core.config import parse_config
from gateway.core.runtime import Runtime
from gateway.core.scope import Grant, Principal, ScopeRequest, effective_scope
from indexes.ingest import read_paths
from indexes.store import IndexStore
from indexes.types import Document

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ("如何轮换密钥", "重放攻击怎么防", "部署到 Kubernetes", "回调签名失败", "索引重建", "密钥", "日志在哪里看",
           "怎么配置 Redis")


async def _measure(rt: Runtime, rounds: int, calls: int) -> dict[str, list[float]]:
    scope = effective_scope(Principal("agent_client", "bench"), ("bench",), "bench", [Grant()], ScopeRequest())
    idx = rt.index("bench")

    async def inline(q: str) -> None:
        retrieve.search_now(rt.index(scope.index), scope, q, 5, summary_chars=200, content_chars=1500)

    async def awaited(q: str) -> None:
        await retrieve.search(rt, scope, q, 5, summary_chars=200, content_chars=1500)

    async def hopped(q: str) -> None:
        idx.search_may_wait = True  # what indexes.dense.HybridIndex declares
        try:
            await retrieve.search(rt, scope, q, 5, summary_chars=200, content_chars=1500)
        finally:
            idx.search_may_wait = False

    async def bare(q: str) -> None:
        await to_thread.run_sync(_noop)

    async def coroutine(q: str) -> None:
        await _nothing()

    variants: dict[str, Callable[[str], Awaitable[None]]] = {
        "inline (before)": inline, "await, lexical (now)": awaited, "await, thread hop": hopped,
        "bare thread hop": bare, "bare coroutine": coroutine}
    for run in variants.values():  # warm: analysers, term statistics, the thread pool
        for q in QUERIES:
            await run(q)
    means: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for name, run in variants.items():
            t0 = time.process_time()
            for i in range(calls):
                await run(QUERIES[i % len(QUERIES)])
            means[name].append((time.process_time() - t0) / calls * 1e6)
    return means


async def _run(rt: Runtime, rounds: int, calls: int) -> dict[str, list[float]]:
    try:
        return await _measure(rt, rounds, calls)
    finally:
        await rt.close()


def _noop() -> None:
    return None


async def _nothing() -> None:
    return None


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.offload", description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=Path, default=ROOT / "deploy" / "demo" / "docs")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=400)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kbgate-offload-") as tmp:
        root = Path(tmp)
        docs = [d for d in read_paths([args.docs]) if isinstance(d, Document)]
        IndexStore(root / "indexes").create_or_open_for_write("bench").ingest(docs, progress=False)
        rt = Runtime(parse_config({"indexes": {"dir": "indexes"}}, base_dir=root, env={}))
        figures = uvloop.run(_run(rt, args.rounds, args.calls))
    base = figures["inline (before)"]
    print(f"{len(docs)} documents, {args.rounds} rounds x {args.calls} searches per variant (uvloop)\n")
    print("| variant | CPU µs per search (median of rounds) | minus inline, same round: median [quartiles] |")
    print("|---|---:|---:|")
    for name, means in figures.items():
        diffs = sorted(m - b for m, b in zip(means, base, strict=True))
        q1, _, q3 = statistics.quantiles(diffs, n=4)
        print(f"| {name} | {statistics.median(means):.1f} | {statistics.median(diffs):+.1f} [{q1:+.1f}, {q3:+.1f}] |")


if __name__ == "__main__":
    main()
