"""Summaries of py-spy `--format raw` (collapsed stacks) profiles.

Rationale: docs/design-notes.md, "bench/flame.py".
"""

from __future__ import annotations

import re
import sys
from collections import Counter
from pathlib import Path

__all__ = ["PARTS", "parts", "summarize"]

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


PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # (part of a callback, frame substrings). A sample goes to the part of its innermost frame
    # that matches one, in this order (Tantivy's doc-store reads under make_hit are loads, a
    # socket write under the handler's send is HTTP); frames of no part (uvloop, asyncio,
    # redis-py, libc) are looked through to the caller that made them.
    ("stored chunk loads (Tantivy doc store)", ("StoreReader", "store6reader", "doc_store", "docstore")),
    ("HTTP (hypercorn, h11: parsing the request, writing the answer)", ("hypercorn/", "h11/")),
    ("excerpts and content windows", ("excerpt (indexes/search.py", "_best_start (indexes/search.py",
                                      "bounded (indexes/search.py")),
    ("Tantivy query (collapse: search, doc_key fast field)", ("collapse (indexes/hits.py",)),
    ("query analysis (folding, jieba, bigrams, synonyms)", ("indexes/analysis.py", "indexes/synonyms.py")),
    ("query building (plan, document frequencies, filters)", ("indexes/search.py", "indexes/store.py",
                                                              "indexes/filters.py")),
    ("Hit building (stored fields, Hit objects)", ("indexes/hits.py", "indexes/publish_time.py",
                                                   "indexes/metadata.py", "indexes/documents.py")),
    ("Redis replay claim and answered", ("gateway/core/replay.py", "gateway/core/script_batch.py")),
    ("answer cache", ("gateway/core/answers.py",)),
    ("scope re-check, cleaning, relevance", ("gateway/core/scope.py", "gateway/core/retrieve.py",
                                             "indexes/safe_text.py", "indexes/relevance.py")),
    ("bookkeeping after the answer (events, log line, metrics, deliveries, key usage, gaps)",
     ("gateway/core/events.py", "log_delivery", "gateway/ops/", "gateway/volcengine/keyuse.py",
      "gateway/core/background.py", "prometheus_client")),
    ("answer JSON", ("success_body (", "result_item (")),
    ("signature, body, parsing, scope resolution", ("gateway/volcengine/", "gateway/core/bodies.py",
                                                    "gateway/core/validate.py", "gateway/serve/app.py")),
)
_IDLE = ("Condition.wait (threading.py", "Queue.get (queue.py", "Event.wait (threading.py")
_OUTSIDE = "event loop and the rest (uvloop, scheduling, garbage collection)"


def parts(path: Path) -> list[tuple[str, float]]:
    """(part, % of the worker's busy samples) of a callback profile (PARTS, then everything
    else of the worker as HTTP and event loop), largest first. Samples of idle threads
    (waiting on a lock or a queue) are left out."""
    counts: Counter[str] = Counter()
    total = 0
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        stack = m.group(1)
        if any(x in stack for x in _IDLE):
            continue
        n = int(m.group(2))
        total += n
        frames = [_line(f) for f in stack.split(";") if f]
        part = next((name for f in reversed(frames) for name, keys in PARTS if any(k in f for k in keys)), _OUTSIDE)
        counts[part] += n
    return [(name, 100 * n / total) for name, n in counts.most_common()] if total else []


def parts_table(path: Path) -> str:
    """`parts` as a Markdown table."""
    rows = ["| part of the callback's worker | % of busy samples |", "|---|---:|"]
    rows += [f"| {name} | {pct:.1f} |" for name, pct in parts(path)]
    return "\n".join(rows)


if __name__ == "__main__":
    print(summarize(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 15))
