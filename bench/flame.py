"""Summaries of py-spy `--format raw` (collapsed stacks) profiles.

Each line is `frame;frame;...;frame COUNT`, outermost first; a frame reads
`function (file.py:line)`. `summarize` returns the functions with the largest inclusive
share (time with the function anywhere on the stack, counted once per sample) and the
largest self share (time at the top of the stack).
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

__all__ = ["summarize"]

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME_LINE = re.compile(r":\d+\)$")


def _name(frame: str) -> str:
    """'search (indexes/store.py:140)' → 'search (indexes/store.py)' (line numbers merged)."""
    frame = _FRAME_LINE.sub(")", frame.strip())
    return re.sub(r"\(/.*?/(site-packages|wt-[a-z]+|lib/python3\.\d+)/", "(", frame)


def summarize(path: Path, top: int = 15) -> str:
    """Markdown table of the `top` functions by inclusive and by self share of samples."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        frames = [_name(f) for f in m.group(1).split(";") if f]
        n = int(m.group(2))
        total += n
        for f in set(frames):
            inclusive[f] += n
        if frames:
            own[frames[-1]] += n
    if not total:
        return "(no samples)"
    rows = ["| function | inclusive % | self % |", "|---|---:|---:|"]
    for f, n in inclusive.most_common(top):
        rows.append(f"| `{f}` | {100 * n / total:.1f} | {100 * own[f] / total:.1f} |")
    rows.append("")
    rows.append("| top self time | self % |")
    rows.append("|---|---:|")
    for f, n in own.most_common(top):
        rows.append(f"| `{f}` | {100 * n / total:.1f} |")
    rows.append(f"\n{total} samples")
    return "\n".join(rows)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15))
