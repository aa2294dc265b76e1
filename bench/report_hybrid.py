"""Markdown of the hybrid phase (bench.hybrid) and its targets: the guard and the open-loop rows, docs/performance.md.

Rationale: docs/design-notes.md, "bench/report_hybrid.py".
"""

from __future__ import annotations

from typing import Any

from bench.hybrid import EMBED_MS, GUARD_MS, OPEN_FRACTION, OPEN_P99_MS

__all__ = ["hybrid_table", "hybrid_targets"]


def _share(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def hybrid_table(c: dict[str, Any]) -> list[str]:
    h = c.get("hybrid")
    if not h:
        return []
    lx, hy, em = h["lexical"], h["hybrid"], h["embedding"]
    st = c["settings"]
    out = ["", f"### Hybrid beside lexical on the TiDB docs (server CPU per cold callback from /proc, the median of "
               f"{st.get('versus_rounds', '?')} alternating rounds of {st.get('versus_seconds', 0):g} s, "
               f"{h.get('connections', '?')} connections, the same unique questions for both paths, answer cache "
               f"off; hybrid = `dense = \"{h['model']}\"`, lexical = `dense = \"none\"`)", "",
           "| path | CPU ms/cb | req/s | p99 ms | rounds' CPU ms/cb | searches answered hybrid |",
           "|---|---:|---:|---:|---|---:|",
           f"| lexical | {lx['server_cpu_ms_per_req']:.2f} | {lx['rps']:,.0f} | {lx['p99_ms']:.1f} "
           f"| {', '.join(f'{x:.2f}' for x in lx['cpu_each'])} | - |",
           f"| hybrid | {hy['server_cpu_ms_per_req']:.2f} | {hy['rps']:,.0f} | {hy['p99_ms']:.1f} "
           f"| {', '.join(f'{x:.2f}' for x in hy['cpu_each'])} | {_share(hy.get('hybrid_share'))} |",
           f"| the query embedding alone, in process ({em['questions']:,} of the questions hybrid answered, "
           f"{em['model']}, one thread) | {em['cpu_ms_per_query']:.2f} | - | {em['p99_ms']:.1f} (wall) | - | - |",
           "",
           f"hybrid − lexical − embedding = **{h['guard_ms']:+.2f} ms** per callback (guard: ≤ +{GUARD_MS:g} ms).",
           "", f"Open loop at {OPEN_FRACTION:.0%} of each path's own capacity (the closed loop's req/s above), "
               "fresh questions, answer cache off:", "",
           "| path | offered req/s | achieved req/s | p50 ms | p99 ms | p99.9 ms | non-2xx + errors "
           "| server CPU ms/req | searches answered hybrid |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, o in h.get("open", {}).items():
        out.append(f"| {name} | {o['offered_rps']:,.0f} | {o['achieved_rps']:,.0f} | {o['p50_ms']:.2f} "
                   f"| {o['p99_ms']:.2f} | {o['p999_ms']:.2f} | {o['non_2xx'] + o['errors']} "
                   f"| {o['server_cpu_ms_per_req']:.2f} | {_share(o.get('hybrid_share'))} |")
    return out


def hybrid_targets(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(target, measured, met) rows of the hybrid phase; 'not run' rows without it."""
    h = (result.get("corpora") or {}).get("hybrid")
    guard = f"hybrid server CPU per cold callback ≤ lexical + embedding + {GUARD_MS:g} ms (tidb-docs-cn)"
    embed = f"the query embedding alone ≤ {EMBED_MS:.2f} CPU ms per question (tidb-docs-cn questions)"
    if not h:
        return [(guard, "-", "not run"), (embed, "-", "not run")] + [
            (f"open loop at {OPEN_FRACTION:.0%} of capacity: p99 ≤ {OPEN_P99_MS:g} ms ({p}, tidb-docs-cn)", "-",
             "not run") for p in ("lexical", "hybrid")]
    lx, hy, em = h["lexical"], h["hybrid"], h["embedding"]
    share = hy.get("hybrid_share")
    all_hybrid = share is not None and share >= 0.99
    rows = [(guard, f"{h['guard_ms']:+.2f} ms ({hy['server_cpu_ms_per_req']:.2f} − {lx['server_cpu_ms_per_req']:.2f}"
                    f" − {em['cpu_ms_per_query']:.2f}; {_share(share)} answered hybrid)",
             ("yes" if h["guard_ms"] <= GUARD_MS else "NO") if all_hybrid else "not measured: fallbacks"),
            (embed, f"{em['cpu_ms_per_query']:.2f} ms", "yes" if em["cpu_ms_per_query"] <= EMBED_MS else "NO")]
    for name, o in h.get("open", {}).items():
        bad = o["non_2xx"] + o["errors"]
        rows.append((f"open loop at {OPEN_FRACTION:.0%} of capacity: p99 ≤ {OPEN_P99_MS:g} ms ({name}, tidb-docs-cn)",
                     f"p99 {o['p99_ms']:.1f} ms at {o['offered_rps']:,.0f} req/s" + (f", {bad} failed" if bad else ""),
                     "yes" if o["p99_ms"] <= OPEN_P99_MS and not bad else "NO"))
    return rows
