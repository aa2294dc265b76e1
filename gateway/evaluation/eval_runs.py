"""Per-question results of `kbgate eval` runs, saved and compared: the wins/losses rule.

Rationale: docs/design-notes.md, "gateway/evaluation/eval_runs.py".
"""

from __future__ import annotations

import datetime as dt
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gateway.evaluation.evaluation import QueryScore

__all__ = ["Fallbacks", "PerSet", "Verdict", "compare", "current_rev", "fallbacks_note", "latest", "load", "save",
           "verdicts_table"]

PerSet = Mapping[str, Mapping[str, Sequence[QueryScore]]]
"""'<corpus>/<set label>' → system → its per-question scores."""
Outcome = tuple[float, float, int]  # (mrr, hit, results)
Fallbacks = Mapping[str, Mapping[str, int | None]]
"""'<corpus>/<set label>' → system → searches answered without its stage (None: no stage)."""


def current_rev(cwd: Path | None = None) -> str:
    """The short git revision of HEAD, '+dirty' when the work tree has changes; 'unknown'
    outside a git checkout."""
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=cwd, capture_output=True, text=True,
                             check=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd,
                               capture_output=True, text=True, check=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")


def save(folder: Path, per_set: PerSet, rev: str, now: dt.datetime | None = None,
         fallbacks: Fallbacks | None = None) -> Path:
    """Write this run's per-question outcomes (and its fallbacks per set and system) to
    `folder/<time>-<rev>.json`; returns its path."""
    when = (now or dt.datetime.now(dt.UTC)).replace(microsecond=0)
    data = {"rev": rev, "when": when.isoformat(),
            "sets": {name: {system: {s.query.query_id: _outcome(s) for s in scores}
                            for system, scores in systems.items()} for name, systems in per_set.items()},
            "fallbacks": {name: dict(systems) for name, systems in (fallbacks or {}).items()}}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{when.strftime('%Y%m%dT%H%M%SZ')}-{rev.replace('+', '-')}.json"
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    return path


def _outcome(s: QueryScore) -> list[float | int]:
    kept: list[float | int] = [s.mrr, s.hit, s.results]
    return kept + [s.in_summaries, s.in_first] if s.in_summaries is not None and s.in_first is not None else kept


def latest(folder: Path, *, before: Path | None = None) -> Path | None:
    """The newest saved run in `folder` other than `before` (names sort by time), or None."""
    runs = sorted(p for p in folder.glob("*.json") if p != before) if folder.is_dir() else []
    return runs[-1] if runs else None


def load(path: Path) -> dict[str, Any]:
    """A saved run (module doc for the shape). Raises OSError, orjson.JSONDecodeError."""
    data: dict[str, Any] = orjson.loads(path.read_bytes())
    return data


@dataclass(frozen=True, slots=True)
class Verdict:
    """One set and system: questions won, lost and compared (present in both runs)."""

    set_name: str
    system: str
    wins: int
    losses: int
    compared: int

    @property
    def holds(self) -> bool:
        """The rule: this set loses no more questions than it wins."""
        return self.losses <= self.wins


def _won(before: Outcome, after: Outcome, offtopic: bool) -> int:
    """+1 won, -1 lost, 0 even (module doc)."""
    if offtopic:
        was, now = before[2] > 0, after[2] > 0
        return (was and not now) - (now and not was)
    b, a = (before[0], before[1]), (after[0], after[1])
    return (a > b) - (a < b)


def compare(before: Mapping[str, Any], after: PerSet, offtopic_sets: frozenset[str] = frozenset(),
            *, summaries: bool = False) -> list[Verdict]:
    """Per set and system present in both runs, wins and losses of `after` against `before`
    (a saved run, `load`). offtopic_sets: the set names judged by "answered or not". summaries:
    judge the answer in the Summaries (module doc; off-topic sets and systems without them skipped)."""
    out: list[Verdict] = []
    for name, systems in after.items():
        old_systems = before.get("sets", {}).get(name, {})
        if summaries and name in offtopic_sets:
            continue
        for system, scores in systems.items():
            old = old_systems.get(system)
            if old is None:
                continue
            wins = losses = compared = 0
            for s in scores:
                prev = old.get(s.query.query_id)
                if prev is None:
                    continue
                if summaries:
                    if len(prev) < 5 or s.in_summaries is None or s.in_first is None:
                        continue
                    compared += 1
                    b, a = (float(prev[3]), float(prev[4])), (s.in_summaries, s.in_first)
                    wins += a > b
                    losses += a < b
                    continue
                compared += 1
                verdict = _won((float(prev[0]), float(prev[1]), int(prev[2])), (s.mrr, s.hit, s.results),
                               name in offtopic_sets)
                wins += verdict > 0
                losses += verdict < 0
            if compared or not summaries:
                out.append(Verdict(name, system, wins, losses, compared))
    return out


def verdicts_table(verdicts: Sequence[Verdict], against: str) -> str:
    """Markdown table of `verdicts` and the rule's outcome, against the run named `against`."""
    lines = [f"Per-question wins / losses against {against}:", "",
             "| set | system | compared | wins | losses | rule |", "|---|---|---:|---:|---:|---|"]
    for v in verdicts:
        lines.append(f"| {v.set_name} | {v.system} | {v.compared} | {v.wins} | {v.losses} | "
                     f"{'holds' if v.holds else 'BROKEN'} |")
    broken = [f"{v.set_name} ({v.system})" for v in verdicts if not v.holds]
    lines.append("")
    lines.append("Rule (no set loses more questions than it wins): " +
                 ("holds on every set." if not broken else "broken on " + ", ".join(broken) + "."))
    return "\n".join(lines)


def fallbacks_note(before: Mapping[str, Any], now: Fallbacks) -> str:
    """One line on whether the comparison is between runs whose hybrid and rerank columns used
    their stage on every search: names each set and system with fallbacks in either run."""
    def fell(runs: Mapping[str, Any]) -> list[str]:
        return [f"{name} ({system}: {n})" for name, systems in runs.items() for system, n in systems.items() if n]

    if "fallbacks" not in before:
        return "The saved run did not count fallbacks: its hybrid and rerank wins/losses may include some."
    old, new = fell(before["fallbacks"]), fell(now)
    if not old and not new:
        return "No search fell back in either run: the wins/losses compare the configurations."
    return ("NOT COMPARABLE where searches fell back: " + "; ".join(
        [f"saved run {x}" for x in old] + [f"this run {x}" for x in new]) + ".")
