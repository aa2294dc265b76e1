"""Markdown of one benchmark run, and the targets checked against it.

Rationale: docs/design-notes.md, "bench/report.py".
"""

from __future__ import annotations

from typing import Any

from bench.report_corpora import corpora_tables, corpora_targets
from bench.report_hybrid import hybrid_targets

__all__ = ["TARGETS", "check_targets", "render"]

MB = 1024  # KiB per MiB

TARGETS = {
    # The scale study's targets (an earlier issue); are in bench.report_corpora.
    "search_vs_bm25s": 5.0,   # search alone ≥ 5× the bm25s baseline's queries/s
    "worker_rss_mib": 300.0,  # VmHWM per worker at 100k chunks
    "latency_1m_over_10k": 3.0,
}


def _f(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def _runs(phase: dict[str, Any] | None) -> dict[int, dict[str, float]]:
    return {} if not phase else {int(r["threads"]): r for r in phase["runs"]}


def render(result: dict[str, Any]) -> str:
    env = result["environment"]
    out = [
        f"## kbgate benchmark, {env['started']}",
        "",
        f"Command: `{env['command']}`  ",
        f"Machine: {env['cpus']} CPUs, Python {env['python']}, hypercorn {env['workers']} uvloop workers, "
        f"Redis {env['redis']}; load average at start {env['loadavg_start']}, at end {env.get('loadavg_end', '?')}. "
        f"Load generators: {env['loadgen']}.",
        "",
        "### Targets",
        "",
        "| target | measured | met |",
        "|---|---|---|",
    ]
    for name, measured, met in corpora_targets(result) + hybrid_targets(result) + check_targets(result):
        out.append(f"| {name} | {measured} | {met} |")
    if result.get("corpora"):
        out += [""] + corpora_tables(result["corpora"])
    if result["scales"]:
        out += _scale_tables(result)
    if result.get("build"):
        from bench.build import render as build_section

        out += ["", build_section(result["build"])]
    c = result.get("corpora") or {}
    if c.get("profile"):
        out += ["", "### py-spy: one gateway worker under the TiDB closed loop (unique queries, 32 connections)",
                "", f"Raw profile: `{c.get('profile_file', '')}`", "", c["profile"]]
    return "\n".join(out) + "\n"


def _curve(result: dict[str, Any]) -> list[str]:
    """One row per size and path: what docs/scaling.md reads where one machine stops."""
    out = ["", "### Scale study: the curve (build in its own process; search alone: `search`, 1 thread, Limit 5; "
               "the callback: kbgate serve, closed loop, answer cache off)", "",
           "| scale | path | chunks | build s | build CPU s | disk MiB (of which vectors) | indexer peak RSS MiB "
           "| worker RSS MiB (peak, each) | search p50 / p99 ms | callback p50 / p99 ms (connections) "
           "| server CPU ms/cb | answered hybrid |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in result["scales"]:
        ix, one = s["index"], _runs(s["search"]).get(1)
        path = s.get("dense", "none")
        vec = f" ({ix['dense_bytes'] / 2**20:,.0f})" if ix.get("dense_bytes") else ""
        mem = ", ".join(_f(w.get("VmHWM", 0) / MB, 0) for w in s.get("worker_memory", []))
        for r in s.get("e2e", [])[:1] if one else []:
            share = r.get("hybrid_share")
            out.append(
                f"| {s['label'].split()[0]} | {'lexical' if path == 'none' else 'hybrid ' + path} | {ix['chunks']:,} "
                f"| {_f(ix['seconds'])} | {_f(ix['cpu_s']) if 'cpu_s' in ix else '-'} "
                f"| {_f(ix['size_bytes'] / 2**20, 0)}{vec} | {_f(ix['hwm_kib'] / MB, 0)} | {mem} "
                f"| {one['p50_ms']:.2f} / {one['p99_ms']:.2f} | {r['p50_ms']:.1f} / {r['p99_ms']:.1f} "
                f"({r['connections']}) | {r.get('server_cpu_ms_per_req', 0):.2f} "
                f"| {'-' if share is None else f'{100 * share:.1f}%'} |")
    return out


def _scale_tables(result: dict[str, Any]) -> list[str]:
    out = _curve(result) + [
        "",
        "### Scale study: index build (indexer process: `IndexStore.create_or_open_for_write(...).ingest`)",
        "",
        "| scale | chunks | documents | build s | chunks/s | size on disk MiB | indexer peak RSS MiB "
        "| of which corpus held MiB | bm25s build chunks/s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result["scales"]:
        ix, base = s["index"], s.get("baseline")
        out.append(
            f"| {s['label']} | {ix['chunks']:,} | {ix['documents']:,} | {_f(ix['seconds'])} "
            f"| {_f(ix['chunks_per_s'], 0)} "
            f"| {_f(ix['size_bytes'] / 2**20)} | {_f(ix['hwm_kib'] / MB)} | {_f(ix['rss_before_kib'] / MB)} "
            f"| {_f(base['chunks_per_s'], 0) if base else 'not run'} |")
    out += [
        "",
        "### Scale study: search alone (`KnowledgeIndex.search`, Limit 5, excerpts included; real queries cycled)",
        "",
        "| scale | engine | threads | queries/s | p50 ms | p99 ms | kbgate ÷ bm25s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for s in result["scales"]:
        ours, theirs = _runs(s["search"]), _runs(s.get("baseline"))
        for t, r in sorted(ours.items()):
            ratio = f"{r['qps'] / theirs[t]['qps']:.1f}×" if t in theirs and theirs[t]["qps"] else "-"
            out.append(f"| {s['label']} | kbgate | {t} | {_f(r['qps'], 0)} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
                       f"| {ratio} |")
        for t, r in sorted(theirs.items()):
            out.append(f"| {s['label']} | bm25s+rjieba | {t} | {_f(r['qps'], 0)} | {r['p50_ms']:.2f} "
                       f"| {r['p99_ms']:.2f} | |")
    out += [
        "",
        "### Scale study: end to end (closed loop, wrk; the real questions of both corpora cycled)",
        "",
        "| scale | server | connections | req/s | p50 ms | p99 ms | p99.9 ms | non-2xx | errors "
        "| server CPU ms/req | generator CPU % | other CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in result["scales"]:
        for r in s.get("e2e", []):
            out.append(_e2e_row(s["label"], "kbgate", r))
    out += [
        "",
        "### Scale study: memory per hypercorn worker after the load (VmHWM = peak resident)",
        "",
        "| scale | server | workers | VmHWM MiB each | VmRSS MiB each |",
        "|---|---|---:|---|---|",
    ]
    for s in result["scales"]:
        m = s.get("worker_memory", [])
        out.append(f"| {s['label']} | kbgate | {len(m)} | {', '.join(_f(w.get('VmHWM', 0) / MB) for w in m)} "
                   f"| {', '.join(_f(w.get('VmRSS', 0) / MB) for w in m)} |")
    return out


def _e2e_row(label: str, server: str, r: dict[str, Any]) -> str:
    return (f"| {label} | {server} | {r['connections']} | {_f(r['rps'], 0)} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
            f"| {r['p999_ms']:.2f} | {r['non_2xx']} | {r['errors']} | {r.get('server_cpu_ms_per_req', 0):.2f} "
            f"| {_f(r.get('loadgen_cpu_pct', 0), 0)} | {_f(r.get('other_cpu_pct', 0), 0)} |")


def _scale(result: dict[str, Any], n: int) -> dict[str, Any] | None:
    """The lexical scale study at `n` chunks, or None."""
    return next((s for s in result["scales"] if s["chunks"] == n and s.get("dense", "none") == "none"), None)


def check_targets(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The scale study's (target, measured, 'yes' | 'NO' | 'not run') rows, at 100k (else the
    largest scale); none without a scale study."""
    rows: list[tuple[str, str, str]] = []
    if not result["scales"]:
        return rows
    main = _scale(result, 100_000) or result["scales"][-1]
    at = main["label"]
    ours, theirs = _runs(main["search"]), _runs(main.get("baseline"))
    if theirs:
        pairs = [(t, ours[t]["qps"] / theirs[t]["qps"]) for t in sorted(ours) if t in theirs and theirs[t]["qps"]]
        rows.append((f"scale study: search ≥ 5× bm25s queries/s ({at})",
                     ", ".join(f"{x:.1f}× at {t} thread(s)" for t, x in pairs),
                     _yes(min(x for _, x in pairs) >= TARGETS["search_vs_bm25s"])))
    else:
        rows.append((f"scale study: search ≥ 5× bm25s queries/s ({at})", "baseline not run", "not run"))
    mem = main.get("worker_memory", [])
    if mem:
        worst_mib = max(w.get("VmHWM", 0) for w in mem) / MB
        rows.append((f"scale study: RSS per worker ≤ 300 MB ({at})", f"{worst_mib:,.0f} MiB peak",
                     _yes(worst_mib <= TARGETS["worker_rss_mib"])))
    small, big = _scale(result, 10_000), _scale(result, 1_000_000)
    if small and big:
        a, b = _runs(small["search"])[1]["p50_ms"], _runs(big["search"])[1]["p50_ms"]
        c, d = _runs(small["search"])[1]["p99_ms"], _runs(big["search"])[1]["p99_ms"]
        rows.append(("scale study: search latency at 1M ≤ 3× at 10k (1 thread)", f"p50 {b / a:.1f}×, p99 {d / c:.1f}×",
                     _yes(b / a <= TARGETS["latency_1m_over_10k"])))
    return rows


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"
