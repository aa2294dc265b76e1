"""`kbgate eval`'s two tables: quality per question set (and style) and system, and the costs of
serving each system (callback latency, server CPU per callback), from the per-question scores
`gateway.evaluation.evaluate` gathers."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field

from gateway.evaluation.evaluation import EvalResult, QueryScore, summarize

__all__ = ["SERVED", "SYSTEMS", "Row", "Served", "costs_table", "fallbacks_table", "rows", "summaries_table", "table"]

SERVED = ("lexical", "hybrid", "rerank")
"""The systems served by `kbgate serve` over signed callbacks: the index as configured by default
(lexical), the same index hybrid, the same lexical index with the rerank stage (stand-in model)."""
SYSTEMS = (*SERVED, "bm25s")


@dataclass
class Served:
    """One served system's run over one question set: per-question scores, per-question callback
    milliseconds (client side), the server's CPU ms per callback, the stand-in reranker's CPU ms
    per callback (the rerank column only: CPU spent outside the gateway), and the searches answered
    without the column's stage (hybrid, rerank; None for a column without one)."""

    scores: list[QueryScore]
    latencies: list[float]
    cpu_ms: float | None
    reranker_cpu_ms: float | None = None
    fallbacks: int | None = None


@dataclass
class Row:
    """One line of the tables: a question set (whole: `style` '') or one style of it.

    scores: system name → figures (a system absent from it was not run). latencies / cpu_ms /
    reranker_cpu_ms / fallbacks: per served system, as `Served` (cpu_ms, reranker_cpu_ms and
    fallbacks on whole sets only). offtopic: questions no document answers (only the share
    answered means something).
    """

    corpus: str
    label: str
    style: str
    scores: dict[str, EvalResult] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, float | None] = field(default_factory=dict)
    reranker_cpu_ms: float | None = None
    offtopic: bool = False
    fallbacks: dict[str, int | None] = field(default_factory=dict)

    @property
    def queries(self) -> int:
        return next(iter(self.scores.values())).queries if self.scores else 0

    @property
    def ahead(self) -> bool:
        """lexical beats bm25s on both figures (whole on-topic sets only are judged)."""
        if self.offtopic:
            return True
        ours, theirs = self.scores.get("lexical"), self.scores.get("bm25s")
        return ours is not None and theirs is not None and ours.mrr > theirs.mrr and ours.answer_hit > theirs.answer_hit


def rows(corpus: str, label: str, served: Mapping[str, Served], baseline: list[QueryScore],
         offtopic: bool = False) -> list[Row]:
    """The whole-set row, then one row per style when the set labels its questions. served:
    system → its run (lexical at least); baseline: bm25s's scores of the same questions."""
    per_system = {**{s: v.scores for s, v in served.items()}, "bm25s": baseline}
    lexical = served["lexical"].scores
    whole = Row(corpus, label, "", {s: summarize(v) for s, v in per_system.items()},
                {s: v.latencies for s, v in served.items()}, {s: v.cpu_ms for s, v in served.items()},
                served["rerank"].reranker_cpu_ms if "rerank" in served else None, offtopic,
                {s: v.fallbacks for s, v in served.items()})
    styles = [] if offtopic else list(dict.fromkeys(q.query.style for q in lexical if q.query.style))
    out = [whole]
    for style in styles:
        picked = [i for i, q in enumerate(lexical) if q.query.style == style]
        out.append(Row(corpus, label, style, {s: summarize([v[i] for i in picked]) for s, v in per_system.items()},
                       {s: [v.latencies[i] for i in picked] for s, v in served.items() if v.latencies}))
    return out


def _fmt(result: EvalResult | None, attr: str) -> str:
    return "—" if result is None else f"{getattr(result, attr):.4f}"


def _p50_p99(latencies: list[float]) -> str:
    lat = sorted(latencies)
    return f"{statistics.median(lat):.1f} / {lat[min(len(lat) - 1, int(len(lat) * 0.99))]:.1f}" if lat else "—"


def _names(r: Row) -> list[str]:
    return [r.corpus if not r.style else "", r.label if not r.style else f"↳ {r.style}", str(r.queries)]


def table(rows: list[Row]) -> str:
    """Markdown table of quality: per question set (and style), MRR@10, answer-hit@5 and the
    share answered of each system (an off-topic row shows only the share answered)."""
    head = ["corpus", "question set", "queries"]
    head += [f"MRR@10 {s}" for s in SYSTEMS] + [f"answer-hit@5 {s}" for s in SYSTEMS]
    head += [f"answered {s}" for s in SERVED]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for r in rows:
        cells = _names(r)
        if r.offtopic:  # nothing to rank or find: only the share answered means something
            cells += ["—"] * (2 * len(SYSTEMS))
        else:
            cells += [_fmt(r.scores.get(s), "mrr") for s in SYSTEMS]
            cells += [_fmt(r.scores.get(s), "answer_hit") for s in SYSTEMS]
        cells += [_fmt(r.scores.get(s), "answered") for s in SERVED]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def summaries_table(rows: list[Row]) -> str:
    """Markdown table of what the agent's model reads, whole on-topic sets only, per served
    system: answer-hit@5 over Summary and KnowledgeContent, the answer in the first 5 Summaries
    (and that share of answer-hit@5), in the first Summary, the mean Summary in characters, and
    the searches that fell back (hybrid, rerank)."""
    head = ["corpus", "question set", "queries", "system", "answer-hit@5", "in the 5 Summaries", "of answer-hit@5",
            "in the first Summary", "mean Summary chars", "fallbacks"]
    out = ["| " + " | ".join(head) + " |", "|---|---|---:|---|" + "---:|" * (len(head) - 4)]
    for r in rows:
        if r.style or r.offtopic:
            continue
        for s in SERVED:
            got = r.scores.get(s)
            if got is None or got.in_summaries is None:
                continue
            share = got.in_summaries / got.answer_hit if got.answer_hit else 0.0
            fell = r.fallbacks.get(s)
            out.append("| " + " | ".join(_names(r) + [s, f"{got.answer_hit:.3f}", f"{got.in_summaries:.3f}",
                                                      f"{share:.2f}", f"{got.in_first:.3f}",
                                                      f"{got.mean_summary or 0.0:.0f}",
                                                      "—" if fell is None else str(fell)]) + " |")
    return "\n".join(out)


def costs_table(rows: list[Row]) -> str:
    """Markdown table of costs, whole sets only: callback p50 / p99 ms (client side) and server
    CPU ms per callback of each served system, and the stand-in reranker's CPU ms per callback."""
    head = ["corpus", "question set", "queries"]
    head += [f"{s} p50 / p99 ms" for s in SERVED] + [f"{s} CPU ms / callback" for s in SERVED]
    head += ["stand-in reranker CPU ms / callback"]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for r in rows:
        if r.style:
            continue
        cpu = [r.cpu_ms.get(s) for s in SERVED]
        cells = _names(r) + [_p50_p99(r.latencies.get(s, [])) for s in SERVED]
        cells += ["—" if c is None else f"{c:.2f}" for c in cpu]
        cells.append("—" if r.reranker_cpu_ms is None else f"{r.reranker_cpu_ms:.2f}")
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def fallbacks_table(rows: list[Row]) -> str:
    """Per whole set, the searches each column with a stage (hybrid, rerank) answered without it,
    and a verdict line: a run with any fallback is not comparable with one without."""
    staged = [s for s in SERVED if any(r.fallbacks.get(s) is not None for r in rows)]
    if not staged:
        return "No column with a hybrid or rerank stage was served."
    head = ["corpus", "question set", "queries"] + [f"{s} fallbacks" for s in staged]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    total = 0
    for r in rows:
        if r.style:
            continue
        counts = [r.fallbacks.get(s) for s in staged]
        total += sum(c or 0 for c in counts)
        out.append("| " + " | ".join(_names(r) + ["—" if c is None else str(c) for c in counts]) + " |")
    out.append("")
    out.append("No search fell back: every hybrid and rerank figure is its stage's." if not total else
               f"NOT COMPARABLE: {total} searches fell back to the order before their stage (deadline, breaker "
               "or error); the columns above measured something else than their configuration.")
    return "\n".join(["Searches answered without their column's stage (per set):", "", *out])
