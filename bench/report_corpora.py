"""Markdown tables of the real-corpus phases (bench.realcorpora) and targets.

Rationale: docs/design-notes.md, "bench/report_corpora.py".
"""

from __future__ import annotations

from typing import Any

from bench.report_hybrid import hybrid_table

__all__ = ["TARGETS", "TARGETS_MINIMAL", "corpora_tables", "corpora_targets"]

MB = 1024  # KiB per MiB

TARGETS = {
    "ratio": {"tidb-docs-cn": 0.35, "cmrc2018": 0.40},  # kbgate ÷ floor req/s, unique mix, closed loop
    "open_p99_ms": 15.0,         # open loop at 50% of kbgate's own capacity
    "open_fraction": 0.5,
    "build_chunks_per_s": 10_000.0,  # index build at 100k chunks
    "huge_ratio": 2.0,           # a callback matching a 35,000-chunk document vs a normal one
}


TARGETS_MINIMAL = {
    "cpu_vs_minimal": 2.0,  # kbgate's server CPU per cold callback ÷ the minimal gateway's, per corpus
}

_SERVER_NAMES = {"floor": "floor (bare Starlette)", "minimal": "minimal gateway", "kbgate": "kbgate"}


def _f(x: float, digits: int = 0) -> str:
    return f"{x:,.{digits}f}"


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"


def _closed(c: dict[str, Any], corpus: str, server: str, mix: str) -> dict[str, Any] | None:
    return next((r for r in c.get("closed", []) if r["corpus"] == corpus and r["server"] == server
                 and r["mix"] == mix), None)


def _open(c: dict[str, Any], corpus: str, server: str, frac: float) -> dict[str, Any] | None:
    return next((r for r in c.get("open", []) if r["corpus"] == corpus and r["server"] == server
                 and abs(r["fraction"] - frac) < 1e-9), None)


def corpora_tables(c: dict[str, Any]) -> list[str]:
    """Markdown lines for the corpus phases' result dict `c`."""
    st = c["settings"]
    out = [
        f"### End to end on the real corpora: closed loop (wrk, {st['wrk_threads']} threads, "
        f"{st['connections']} connections, {st['seconds']:g} s; every request a fresh signed callback)",
        "",
        "| corpus | chunks | server | mix | req/s | ÷ floor | p50 ms | p99 ms | p99.9 ms | non-2xx | errors "
        "| repeats % | cache hits % | server CPU ms/req | generator CPU % | other CPU % |",
        "|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in c.get("closed", []):
        floor = _closed(c, r["corpus"], "floor", "-")
        ratio = f"{r['rps'] / floor['rps']:.2f}" if r["server"] != "floor" and floor and floor["rps"] else "-"
        rep = "-" if r.get("repeat_share") is None else f"{100 * r['repeat_share']:.0f}"
        if r["server"] == "kbgate" and r.get("wrapped"):
            rep += f" (+{r['wrapped']:,} sent twice)"
        chunks = c["indexes"].get(r["corpus"], {}).get("chunks", 0)
        server = _SERVER_NAMES[r["server"]]
        mix = f"{r['mix']}, cache {r['cache']}" if r.get("cache") else r["mix"]
        if r.get("round"):
            mix += f" (round {r['round']})"
        hits = "-" if r.get("cache_hit_share") is None else f"{100 * r['cache_hit_share']:.0f}"
        out.append(f"| {r['corpus']} | {chunks:,} | {server} | {mix} | {_f(r['rps'])} | {ratio} "
                   f"| {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['p999_ms']:.2f} | {r['non_2xx']} | {r['errors']} "
                   f"| {rep} | {hits} | {r['server_cpu_ms_per_req']:.2f} | {_f(r['loadgen_cpu_pct'])} "
                   f"| {_f(r['other_cpu_pct'])} |")
    out += _cache_summary(c)
    out += _versus(c)
    out += hybrid_table(c)
    out += [
        "",
        "### Open loop: a fixed offered rate, latency from each request's intended send time "
        f"(bench.openloop, {st['seconds']:g} s after {st['warmup']:g} s warm-up at the same rate)",
        "",
        "| corpus | server | offered req/s | of kbgate's capacity | achieved req/s | p50 ms | p99 ms | p99.9 ms "
        "| max ms | non-2xx | errors | service p99 ms | generator lag p99 ms | server CPU ms/req | other CPU % |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in c.get("open", []):
        server = "floor (bare Starlette)" if r["server"] == "floor" else "kbgate"
        out.append(f"| {r['corpus']} | {server} | {_f(r['offered_rps'])} | {r['fraction']:.0%} "
                   f"| {_f(r['achieved_rps'])} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | {r['p999_ms']:.2f} "
                   f"| {r['max_ms']:.1f} | {r['non_2xx']} | {r['errors']} | {r['service_p99_ms']:.2f} "
                   f"| {r['lag_p99_ms']:.2f} | {r['server_cpu_ms_per_req']:.2f} | {_f(r['other_cpu_pct'])} |")
    g = c.get("ceiling")
    if g:
        kept = f"{_f(g['kept'])} req/s" if g["kept"] else "below the first rate tried"
        out += ["", f"Open-loop generator's own ceiling against the floor (rising rates, 3 s each; a rate is kept "
                    f"while the generator's lag p99 ≤ {g['lag_ms']:g} ms, nothing fails and ≥ 95% is answered): "
                    f"kept up to **{kept}** on this machine now.", "",
                "| offered req/s | achieved req/s | p99 ms | generator lag p99 ms | failed | generator µs CPU/req "
                "| generator CPU % | kept |",
                "|---:|---:|---:|---:|---:|---:|---:|---|"]
        for o in g["steps"]:
            out.append(f"| {_f(o['offered_rps'])} | {_f(o['achieved_rps'])} | {o['p99_ms']:.2f} "
                       f"| {o['lag_p99_ms']:.2f} | {o['errors'] + o['non_2xx']} | {o['generator_us_per_req']:.0f} "
                       f"| {_f(o['loadgen_cpu_pct'])} "
                       f"| {_yes(o['kept'])} |")
    h = c.get("huge")
    if h:
        out += [
            "",
            f"### One document of {h['chunks']:,} chunks (TiDB docs without and with it; the same queries through "
            f"the callback, one connection, sequential, {h['rounds']} rounds, median per query; answer cache "
            f"{h.get('answer_cache', 'on')})",
            "",
            "| queries | index | returns it | p50 ms | p90 ms | mean ms | server CPU ms/callback "
            "| ÷ normal (p50, CPU) |",
            "|---|---|---:|---:|---:|---:|---:|---|",
        ]
        for name, row in h["sets"].items():
            for key, index in (("normal", "tidb-docs-cn"), ("huge", f"+ 1 document of {h['chunks']:,} chunks")):
                x = row[key]
                ratio = f"{row['p50_ratio']:.2f}×, {row['cpu_ratio']:.2f}×" if key == "huge" else "-"
                ret = f"{row['returned']}/{row['queries']}" if key == "huge" else "-"
                out.append(f"| {name} ({row['queries']}) | {index} | {ret} | {x['p50_ms']:.2f} | {x['p90_ms']:.2f} "
                           f"| {x['mean_ms']:.2f} | {x['server_cpu_ms']:.2f} | {ratio} |")
        out += ["", "ordinary: TiDB questions, which match some of the huge document's chunks (it is made of the "
                    "same sentences); aimed: queries its chunks rank first for (a word of its title plus a passage of "
                    "it), the case where a callback has to read past that document's chunks."]
    out += _wings(c)
    if c.get("memory"):
        m = c["memory"]
        out += ["", "Memory per worker of the corpora server (three indexes open), VmHWM MiB: "
                + ", ".join(_f(w.get("VmHWM", 0) / MB, 1) for w in m) + "."]
    if c.get("streams"):
        s = c["streams"]
        out += ["", "Queries: " + "; ".join(
            f"{k}: {v['real']:,} real questions, {v['unique']:,} unique in all, {v['used']:,} sent"
            + (f", {v['reused']:,} handed out twice (the stream ran short)" if v.get("reused") else "")
            for k, v in s.items()) + "."]
    out += ["", "Quality is measured by `make eval` (every set, every style), not here: the target is no loss "
                "there (within 0.01 on every set)."]
    return out


def _cache_summary(c: dict[str, Any]) -> list[str]:
    """One sentence: the Zipf mix with the answer cache off and on, per corpus (none when the
    run had it off throughout)."""
    entries = c["settings"].get("answer_cache")
    parts = []
    for corpus in dict.fromkeys(r["corpus"] for r in c.get("closed", [])):
        rows = {r.get("cache"): r for r in c["closed"]
                if r["corpus"] == corpus and r["server"] == "kbgate" and r["mix"] == "zipf"}
        off, on = rows.get("off"), rows.get("on")
        if off and on and off["rps"]:
            share = on.get("cache_hit_share")
            parts.append(f"{corpus}: {_f(off['rps'])} → {_f(on['rps'])} req/s (×{on['rps'] / off['rps']:.2f}, "
                         f"p99 {off['p99_ms']:.1f} → {on['p99_ms']:.1f} ms"
                         + (f", {100 * share:.0f}% of lookups answered from memory" if share is not None else "")
                         + ")")
    if not entries:
        return ["", "Answer cache off throughout this run (`--answer-cache 0`)."]
    return ["", f"Answer cache ({entries:,} entries per worker; `[search] answer_cache_entries`), switched by a config "
                "reload between the two Zipf runs, which send the same requests: " + ("; ".join(parts) or "-")
            + ". The unique mix and the open loop run with it on, every query a miss: their rows are the cold "
              "cost, the cache's own lookups and stores included."]


def _versus(c: dict[str, Any]) -> list[str]:
    """The kbgate ÷ minimal gateway table: server CPU per callback per target first."""
    v = c.get("versus")
    if not v:
        return []
    st = c["settings"]
    out = ["", f"### kbgate beside the minimal gateway (server CPU per callback from /proc, the median of "
               f"{st.get('versus_rounds', '?')} alternating rounds of {st.get('versus_seconds', 0):g} s on the same "
               "unique callbacks, kbgate's answer cache off; Zipf: one run each on the same requests, kbgate's cache "
               "on)", "",
           "| corpus | path | floor CPU ms/cb | minimal CPU ms/cb | kbgate CPU ms/cb | kbgate ÷ minimal (CPU) "
           "| minimal req/s | kbgate req/s | minimal p99 ms | kbgate p99 ms | rounds' CPU ms/cb (minimal; kbgate) |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for corpus, m in v.items():
        floor = _closed(c, corpus, "floor", "-")
        fl = f"{floor['server_cpu_ms_per_req']:.2f}" if floor else "-"
        mi, kb = m["minimal"], m["kbgate"]
        mc, kc = mi["server_cpu_ms_per_req"], kb["server_cpu_ms_per_req"]
        each = "; ".join(", ".join(f"{x:.2f}" for x in s["cpu_each"]) for s in (mi, kb))
        out.append(f"| {corpus} | cold (cache off) | {fl} | {mc:.2f} | {kc:.2f} | {kc / mc:.2f} "
                   f"| {_f(mi['rps'])} | {_f(kb['rps'])} | {mi['p99_ms']:.1f} | {kb['p99_ms']:.1f} | {each} |")
        zm = _closed(c, corpus, "minimal", "zipf")
        zk = next((r for r in c["closed"] if r["corpus"] == corpus and r["server"] == "kbgate" and r["mix"] == "zipf"
                   and r.get("cache") == "on"), None)
        if zm and zk:
            out.append(f"| {corpus} | Zipf (cache on) | {fl} | {zm['server_cpu_ms_per_req']:.2f} "
                       f"| {zk['server_cpu_ms_per_req']:.2f} "
                       f"| {zk['server_cpu_ms_per_req'] / zm['server_cpu_ms_per_req']:.2f} | {_f(zm['rps'])} "
                       f"| {_f(zk['rps'])} | {zm['p99_ms']:.1f} | {zk['p99_ms']:.1f} | - |")
    out += ["", "The minimal gateway (bench/minimal.py): Starlette on the same hypercorn settings, the three "
                "signing headers, tolerance, HMAC with compare_digest, one Redis SET NX EX, one tantivy-py BM25 query "
                "over rjieba cut_for_search words of one chunk per section, the first 5 distinct documents, "
                "Summary = the chunk's first 200 characters, KnowledgeContent = the chunk up to 1,500."]
    return out


def _cpu_ratio(c: dict[str, Any] | None, corpus: str) -> float | None:
    """kbgate's median server CPU per cold callback ÷ the minimal gateway's, or None when not run."""
    m = (c or {}).get("versus", {}).get(corpus)
    if not m or not m["minimal"]["server_cpu_ms_per_req"]:
        return None
    return float(m["kbgate"]["server_cpu_ms_per_req"] / m["minimal"]["server_cpu_ms_per_req"])


def _wings(c: dict[str, Any]) -> list[str]:
    out = ["", "### Every wing on the TiDB index (the same closed loop; open loop at the callback's "
               f"{TARGETS['open_fraction']:.0%} rate, or at {TARGETS['open_fraction']:.0%} of the wing's own "
               "closed-loop req/s when that is lower)", "",
           "| wing | path | closed req/s | closed p99 ms | open offered req/s | open p50 ms | open p99 ms "
           "| open p99.9 ms | non-2xx + errors | server CPU ms/req |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    cb_c = _closed(c, "tidb-docs-cn", "kbgate", "unique")
    cb_o = _open(c, "tidb-docs-cn", "kbgate", TARGETS["open_fraction"])
    rows: list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None, str]] = [
        ("Volcengine callback (HMAC)", "/volcengine/bench", cb_c, cb_o, "")]
    for w in c.get("wings", []):
        rows.append((w["wing"], w["path"], w.get("closed"), w.get("open"),
                     "" if w["served"] else f"not served yet ({w['issue']})"))
    for name, path, cl, op, note in rows:
        if note or not cl or not op:
            out.append(f"| {name} | `{path}` | {note or 'not run'} | | | | | | | |")
            continue
        bad = cl["non_2xx"] + cl["errors"] + op["non_2xx"] + op["errors"]
        out.append(f"| {name} | `{path}` | {_f(cl['rps'])} | {cl['p99_ms']:.2f} | {_f(op['offered_rps'])} "
                   f"| {op['p50_ms']:.2f} | {op['p99_ms']:.2f} | {op['p999_ms']:.2f} | {bad} "
                   f"| {cl['server_cpu_ms_per_req']:.2f} |")
    return out


def corpora_targets(result: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(target, measured, 'yes' | 'NO' | 'not run' | note) rows of the real-corpus targets."""
    rows: list[tuple[str, str, str]] = []
    c = result.get("corpora")
    for corpus in ("tidb-docs-cn", "cmrc2018"):
        want_minimal = TARGETS_MINIMAL["cpu_vs_minimal"]
        name = f"server CPU per cold callback ≤ {want_minimal:g} × the minimal gateway's ({corpus})"
        ratio_minimal = _cpu_ratio(c, corpus)
        if ratio_minimal is None:
            rows.append((name, "-", "not run"))
        else:
            m = c["versus"][corpus]  # type: ignore[index]
            rows.append((name, f"{ratio_minimal:.2f}× ({m['kbgate']['server_cpu_ms_per_req']:.2f} ÷ "
                               f"{m['minimal']['server_cpu_ms_per_req']:.2f} ms)", _yes(ratio_minimal <= want_minimal)))
    for corpus in ("tidb-docs-cn", "cmrc2018"):
        want = TARGETS["ratio"][corpus]
        name = f"end to end, unique queries, 32 conns: ≥ {want:.2f} of the floor's req/s ({corpus})"
        k = _closed(c, corpus, "kbgate", "unique") if c else None
        f = _closed(c, corpus, "floor", "-") if c else None
        if k and f and f["rps"]:
            ratio = k["rps"] / f["rps"]
            rows.append((name, f"{ratio:.2f} ({_f(k['rps'])} ÷ {_f(f['rps'])} req/s)", _yes(ratio >= want)))
        else:
            rows.append((name, "-", "not run"))
    frac = TARGETS["open_fraction"]
    for corpus in ("tidb-docs-cn", "cmrc2018"):
        name = f"open loop at {frac:.0%} of kbgate's capacity: p99 ≤ {TARGETS['open_p99_ms']:g} ms ({corpus})"
        o = _open(c, corpus, "kbgate", frac) if c else None
        if o:
            bad = o["non_2xx"] + o["errors"]
            rows.append((name, f"p99 {o['p99_ms']:.1f} ms at {_f(o['offered_rps'])} req/s"
                               + (f", {bad} failed" if bad else ""),
                         _yes(o["p99_ms"] <= TARGETS["open_p99_ms"] and not bad)))
        else:
            rows.append((name, "-", "not run"))
    scale = next((s for s in result.get("scales", []) if s["chunks"] == 100_000
                  and s.get("dense", "none") == "none"), None)
    name = "index build ≥ 10,000 chunks/s at 100k chunks"
    if scale:
        rate = scale["index"]["chunks_per_s"]
        rows.append((name, f"{_f(rate)} chunks/s", _yes(rate >= TARGETS["build_chunks_per_s"])))
    else:
        rows.append((name, "scale study not run at 100k", "not run"))
    h = c.get("huge") if c else None
    if h:
        worst = max((max(r["p50_ratio"], r["cpu_ratio"]), name) for name, r in h["sets"].items())
        rows.append((f"a callback matching a document of {h['chunks']:,} chunks ≤ 2× a normal one",
                     "; ".join(f"{name}: p50 {r['p50_ratio']:.2f}×, server CPU {r['cpu_ratio']:.2f}×"
                               for name, r in h["sets"].items()) + f" (worst: {worst[1]})",
                     _yes(worst[0] <= TARGETS["huge_ratio"])))
    else:
        rows.append(("a callback matching a document of 35,000 chunks ≤ 2× a normal one", "-", "not run"))
    rows.append(("no loss in `make eval` quality (within 0.01 on every set)", "measured by `make eval`",
                 "see make eval"))
    return rows
