"""The overview's chart: questions per day with the no-answer and low-score rates, as SVG.

Rationale: docs/design-notes.md, "gateway/console/chart.py".
"""

from __future__ import annotations

from typing import Any

import jinja2

from gateway.console import i18n
from gateway.console.render import TEMPLATES

W, H = 820.0, 220.0  # the plot area
NARROW_W, NARROW_H = 280.0, 200.0  # the phone's plot area
LEFT, TOP, RIGHT, BOTTOM = 48.0, 40.0, 56.0, 60.0  # margins: axes, title, labels, legend
NARROW_BOTTOM = 96.0  # three legend lines
STEPS = 5

_env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                          undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                          extensions=["jinja2.ext.i18n"])
_env.install_gettext_callables(i18n.gettext_raw, i18n.ngettext_raw, newstyle=True)  # type: ignore[attr-defined]
_env.policies["ext.i18n.trimmed"] = True
_env.globals["zip"] = zip


def _points(values: list[float | None], scale: float, n: int, w: float = W,
            h: float = H) -> list[list[tuple[float, float]]]:
    """Runs of (x, y) points of `values` (None breaks a line), x by index, y = value × scale."""
    runs: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(values):
        if v is None:
            if runs[-1]:
                runs.append([])
            continue
        x = LEFT + (w * i / (n - 1) if n > 1 else w / 2)
        runs[-1].append((round(x, 1), round(TOP + h - v * scale, 1)))
    return [r for r in runs if r]


def geometry(q: dict[str, Any], narrow: bool = False) -> dict[str, Any]:
    """The template's values for the "questions" part of the overview (gateway.console.overview_data);
    `narrow`: the phone's drawing (at most 4 day labels, the legend's entries one under another)."""
    n = len(q["days"])
    w, h, bottom = (NARROW_W, NARROW_H, NARROW_BOTTOM) if narrow else (W, H, BOTTOM)
    top = max(STEPS, -(-max(q["total"] or [0]) // STEPS) * STEPS)
    every = max(1, -(-n // (4 if narrow else 8)))  # at most 8 (4) day labels
    legend = [(0, 0), (0, 20), (0, 40)] if narrow else [(0, 0), (190, 0), (400, 0)]
    return {
        "width": LEFT + w + RIGHT, "height": TOP + h + bottom, "left": LEFT, "top": TOP, "w": w, "h": h,
        "grid": [{"y": round(TOP + h - h * i / STEPS, 1), "count": top * i // STEPS, "pct": 100 * i // STEPS}
                 for i in range(STEPS + 1)],
        "labels": [{"x": round(LEFT + (w * i / (n - 1) if n > 1 else w / 2), 1), "text": d[5:]}
                   for i, d in enumerate(q["days"]) if (n - 1 - i) % every == 0],  # today always labelled
        "legend": [{"x": x, "y": y} for x, y in legend],
        "questions": _points(list(q["total"]), h / top, n, w, h),
        "no_answer": _points([None if r is None else 100 * r for r in q["no_answer_rate"]], h / 100, n, w, h),
        "low_score": _points([None if r is None else 100 * r for r in q["low_score_rate"]], h / 100, n, w, h),
    }


def questions_svg(q: dict[str, Any], narrow: bool = False) -> str:
    """The SVG document (UTF-8 text) of questions per day (left axis) with the no-answer and
    low-score rates in percent (right axis), in the request's language; `narrow`: for a phone."""
    return _env.get_template("chart.svg").render(**geometry(q, narrow))
