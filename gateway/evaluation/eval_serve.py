"""The served side of `kbgate eval`: a real `kbgate serve` per column, questions as signed
Volcengine callbacks, and the stand-in reranker beside it (`gateway.evaluation.rerank_standin`).

Rationale: docs/design-notes.md, "gateway/evaluation/eval_serve.py".
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import orjson

from gateway.evaluation.cpu import tree_cpu_seconds
from gateway.evaluation.eval_table import Served
from gateway.evaluation.evaluation import EvalQuery, score_queries
from gateway.ops.processes import free_port, stop, wait_ready
from gateway.volcengine.signing import sign_headers

__all__ = ["CLIENT_TIMEOUT_S", "READY_SECONDS", "Standin", "by_callback", "doc_id_of", "fallbacks", "free_port",
           "standin", "stop"]

READY_SECONDS = 300.0
"""Default wait for a started server (or the stand-in reranker, or a hybrid server's model) to be
ready: `kbgate eval --ready-seconds`. Under a load average of ~18 on 2 cores, 30 s was missed."""
CLIENT_TIMEOUT_S = 120.0
"""The client's wait for one callback's answer (the servers' own deadlines are shorter)."""
REJECTED_QUERY_RETS = frozenset({40008, 40009})
"""The callback refuses these queries by contract (query_empty, query_too_long)."""
LIMIT = 10

Standin = tuple[str, int]
"""The stand-in reranker's (base URL, pid)."""

# /metrics counter and the outcome that means "the column's stage was used", per column kind.
_STAGES = {"hybrid": ("kbgate_hybrid_searches_total", "hybrid"), "rerank": ("kbgate_rerank_calls_total", "reranked")}


def doc_id_of(result_id: str) -> str:
    """'{doc_id}#{chunk}' or '{doc_id}' → doc_id (the chunk suffix is digits)."""
    head, sep, tail = result_id.rpartition("#")
    return head if sep and tail.isdigit() else result_id


@contextmanager
def standin(wanted: bool, ready_seconds: float = READY_SECONDS) -> Iterator[Standin | None]:
    """The stand-in reranker on a free loopback port: yields its (base URL, pid) (None when not
    `wanted`), stops it on exit. Raises RuntimeError when it is not ready in `ready_seconds`."""
    if not wanted:
        yield None
        return
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "gateway.evaluation.rerank_standin", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc, ready_seconds)
        yield base, proc.pid
    finally:
        stop(proc)


def outcomes(metrics: str, counter: str, index: str) -> dict[str, float]:
    """From a /metrics text, `counter`'s count per outcome for `index` (outcome → count)."""
    head = f'{counter}{{index="{index}",outcome="'
    return {line[len(head):].split('"', 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in metrics.splitlines() if line.startswith(head)}


def fallbacks(before: dict[str, float], after: dict[str, float], used: str) -> int:
    """Searches counted between two `outcomes` readings with any outcome other than `used`."""
    return int(sum(n - before.get(k, 0.0) for k, n in after.items() if k != used))


def by_callback(name: str, sets: Sequence[list[EvalQuery]], workdir: Path, refused: list[str],
                extra_config: str = "", search: str = "", reranker: Standin | None = None,
                stage: str = "", ready_seconds: float = READY_SECONDS) -> list[Served]:
    """Serve index `name` with `kbgate serve` (config + extra_config; `search`: more lines of its
    [search] table) and score every question set through signed callbacks; one `Served` per set.
    refused: the questions the callback refuses by contract (they score 0) are appended to it.
    reranker: the stand-in when extra_config uses it (its CPU is measured too). stage: 'hybrid' or
    'rerank' when the column has that stage (its fallbacks are counted per set, module doc).
    Raises RuntimeError when the server is not ready in `ready_seconds` or a callback fails."""
    secret = secrets.token_urlsafe(24)
    port = free_port()
    cfg = workdir / f"{name}.toml"
    (workdir / f"{name}.secret").write_text(secret)
    cfg.write_text(
        f'[server]\nbind = "127.0.0.1:{port}"\n[indexes]\ndir = "indexes"\n[search]\nmax_limit = {LIMIT}\n{search}'
        f'[tenants.eval]\n[[tenants.eval.secrets]]\nid = "eval"\nvalue_file = "{name}.secret"\n'
        f'[[tenants.eval.routes]]\nfirst_level_id = "eval"\nsecond_level_id = "{name}"\n'
        f'index = "{name}"\n' + extra_config
    )
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "serve", "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    standin_pid = reranker[1] if reranker else None
    out: list[Served] = []
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc, ready_seconds)
        with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT_S) as client:
            latencies: list[float] = []

            def via_callback(query: str) -> list[tuple[str, str, str]]:
                body = orjson.dumps({"FirstLevelId": "eval", "SecondLevelId": name, "Query": query, "Limit": LIMIT})
                started = time.perf_counter()
                r = client.post("/volcengine/eval", content=body, headers=sign_headers(secret, body, int(time.time())))
                latencies.append((time.perf_counter() - started) * 1000)
                env = orjson.loads(r.content)
                if env.get("Ret") in REJECTED_QUERY_RETS:
                    refused.append(query)  # e.g. an empty query in the data: scores 0, as for the baseline
                    return []
                if env.get("Ret") != 0:
                    raise RuntimeError(f"callback failed: Ret={env.get('Ret')} Msg={env.get('Msg')}")
                return [(doc_id_of(i["Id"]), f"{i.get('Summary', '')}\n{i.get('KnowledgeContent', '')}",
                         str(i.get("Summary", ""))) for i in env["Result"]]

            counter, used = _STAGES.get(stage, ("", ""))

            def read() -> dict[str, float]:
                return outcomes(client.get("/metrics").text, counter, name) if counter else {}

            via_callback("预热")  # the first callback opens the index and loads the analysers
            if stage == "hybrid":  # a hybrid server loads its model in the background: wait until
                # a search was answered hybrid (a fast answer may be the lexical fallback)
                if not _until(lambda: read().get(used, 0.0) > 0, lambda: via_callback("预热模型"), ready_seconds):
                    print(f"{name}: the hybrid server answered no search hybrid in {ready_seconds:.0f} s; "
                          "its searches are counted as fallbacks", file=sys.stderr)
            for queries in sets:
                latencies = []
                cpu_before = tree_cpu_seconds(proc.pid)
                standin_before = tree_cpu_seconds(standin_pid) if standin_pid else 0.0
                seen = read()
                scores = score_queries(via_callback, queries, mrr_k=10, answer_k=5, summaries=True)
                fell = fallbacks(seen, read(), used) if counter else None
                cpu = tree_cpu_seconds(proc.pid) - cpu_before
                standin_cpu = tree_cpu_seconds(standin_pid) - standin_before if standin_pid else None
                per = 1000 / len(queries) if queries else 0.0
                out.append(Served(scores, latencies, cpu * per if queries else None,
                                  standin_cpu * per if standin_cpu is not None and queries else None, fell))
    finally:
        stop(proc)
    return out


def _until(done: Callable[[], bool], poke: Callable[[], object], seconds: float) -> bool:
    """Call `poke` every 0.5 s until `done()` (True) or `seconds` have passed (False)."""
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            return False
        poke()
        time.sleep(0.5)
    return True
