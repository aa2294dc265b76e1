"""Summaries of py-spy `--format raw` (collapsed stacks) profiles.

Each line is `frame;frame;...;frame COUNT`, outermost first; a frame reads
`function (file.py:line)`. `summarize` returns three tables:

- the innermost *project* line of each sample (`gateway/` or `indexes/`, with its line
  number): where the app's own code was when the sample was taken, everything it called
  (libraries, Tantivy's Rust, syscalls) included. Samples with no project frame below the
  worker's start are hypercorn/uvloop's own work (parsing, scheduling);
- the functions with the largest inclusive share (anywhere on the stack, once per sample),
  leaving out the frames on (nearly) every sample (process start, the event loop);
- the largest self shares (top of the stack).

py-spy counts a thread as busy while it is runnable, so on a loaded machine the time a
worker waits for a CPU after a wake-up (a socket write waking the client) is counted where
it was preempted.
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

__all__ = ["summarize"]

_LINE = re.compile(r"^(.*) (\d+)$")
_FRAME_LINE = re.compile(r":\d+\)$")
_PROJECT = re.compile(r"\((gateway|indexes)/")
_EVERYWHERE = 0.99  # inclusive share above which a frame is scaffolding (process start, event loop)


def _name(frame: str) -> str:
    """'search (indexes/store.py:140)' → 'search (indexes/store.py)' (line numbers merged)."""
    frame = _FRAME_LINE.sub(")", frame.strip())
    return re.sub(r"\(/.*?/(site-packages|wt-[a-z]+|lib/python3\.\d+)/", "(", frame)


def _line(frame: str) -> str:
    """'search (/x/wt-a/indexes/store.py:280)' → 'search (indexes/store.py:280)'."""
    return re.sub(r"\(/.*?/(site-packages|wt-[a-z]+|lib/python3\.\d+)/", "(", frame.strip())


def summarize(path: Path, top: int = 15) -> str:
    """Markdown tables (module docstring) of the `top` entries each."""
    total = 0
    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    innermost: Counter[str] = Counter()
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        raw = [f for f in m.group(1).split(";") if f]
        frames = [_name(f) for f in raw]
        n = int(m.group(2))
        total += n
        for f in set(frames):
            inclusive[f] += n
        if frames:
            own[frames[-1]] += n
        mine = [f for f in raw if _PROJECT.search(f)]
        innermost[_line(mine[-1]) if len(mine) > 1 else "(hypercorn/uvloop, outside the app)"] += n
    if not total:
        return "(no samples)"
    rows = ["| innermost project line (everything it called included) | % of samples |", "|---|---:|"]
    for f, n in innermost.most_common(top):
        rows.append(f"| `{f}` | {100 * n / total:.1f} |")
    rows += ["", "| function | inclusive % | self % |", "|---|---:|---:|"]
    shown = [(f, n) for f, n in inclusive.most_common() if n < _EVERYWHERE * total][:top]
    for f, n in shown:
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
