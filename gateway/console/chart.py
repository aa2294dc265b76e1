"""The overview's chart: questions per day with the no-answer and low-score rates, as SVG.

Drawn server-side from templates/chart.svg (autoescaped like every page; only day labels and
numbers, never question text) and served as its own same-origin image,
`/admin/overview/chart.svg`, shown with <img>: nothing in it runs and no markup is marked safe
by hand. Why no chart library: docs/console.md, "The overview" (pygal hooks the import system
with a finder Python 3.11 warns about on every later import; matplotlib is tens of MB and a
slow import per worker for one line chart).

Geometry (SVG user units): the plot is `W` × `H` inside margins; questions use the left axis
(0..top, five steps), the rates the right axis (0..100 %).
"""

from __future__ import annotations

from typing import Any

import jinja2

from gateway.console.render import TEMPLATES

W, H = 820.0, 220.0  # the plot area
LEFT, TOP, RIGHT, BOTTOM = 48.0, 40.0, 56.0, 60.0  # margins: axes, title, labels, legend
STEPS = 5

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def _points(values: list[float | None], scale: float, n: int) -> list[list[tuple[float, float]]]:
    """Runs of (x, y) points of `values` (None breaks a line), x by index, y = value × scale."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        x = LEFT + (W * i / (n - 1) if n > 1 else W / 2)
        runs[-1].append((round(x, 1), round(TOP + H - v * scale, 1)))
    return [r for r in runs if r]


def geometry(q: dict[str, Any]) -> dict[str, Any]:
    """The template's values for the "questions" part of the overview (gateway.console.overview_data)."""
    n = len(q["days"])
    top = max(STEPS, -(-max(q["total"] or [0]) // STEPS) * STEPS)
    every = max(1, -(-n // 8))  # at most 8 day labels
    return {
        "width": LEFT + W + RIGHT, "height": TOP + H + BOTTOM, "left": LEFT, "top": TOP, "w": W, "h": H,
        "grid": [{"y": round(TOP + H - H * i / STEPS, 1), "count": top * i // STEPS, "pct": 100 * i // STEPS}
                 for i in range(STEPS + 1)],
        "labels": [{"x": round(LEFT + (W * i / (n - 1) if n > 1 else W / 2), 1), "text": d[5:]}
                   for i, d in enumerate(q["days"]) if (n - 1 - i) % every == 0],  # today always labelled
        "questions": _points(list(q["total"]), H / top, n),
        "no_answer": _points([None if r is None else 100 * r for r in q["no_answer_rate"]], H / 100, n),
        "low_score": _points([None if r is None else 100 * r for r in q["low_score_rate"]], H / 100, n),
    }


def questions_svg(q: dict[str, Any]) -> str:
    """The SVG document (UTF-8 text) of questions per day (left axis) with the no-answer and
    low-score rates in percent (right axis)."""
    return _env.get_template("chart.svg").render(**geometry(q))
