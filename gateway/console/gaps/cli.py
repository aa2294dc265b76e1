"""`kbgate gaps` and `kbgate documents`: the gap view and the served counts of a running server,
read through its admin JSON (/admin/gaps.json, /admin/documents.json), so they show the same
record whether it is in Redis or in the server's memory; `kbgate gaps --file GROUP` files (or
bumps) the group's improvement task exactly as the page's button does.

Rationale: docs/design-notes.md, "gateway/console/gaps/cli.py".
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
from typing import Any

import httpx
import orjson

from gateway.console.gaps.groups import MIN_GROUP_PREFIX
from gateway.console.scores import score_text

TOKEN_ENV = "KBGATE_ADMIN_TOKEN"


def register(sub: Any) -> None:
    """Add `gaps` and `documents` to the `kbgate` subparsers `sub`."""
    g = sub.add_parser("gaps", help="questions the knowledge could not answer, grouped; file a group as a task")
    g.add_argument("--url", required=True, help="the running server's base URL, e.g. http://127.0.0.1:8080")
    g.add_argument("--file", metavar="GROUP", help="file (or bump) the improvement task of GROUP (id or 8+ "
                                                   "leading characters)")
    g.add_argument("--json", action="store_true", help="print the server's JSON")
    g.add_argument("--timeout", type=float, default=10.0)
    g.set_defaults(func=cmd_gaps)
    d = sub.add_parser("documents", help="how often each document was served; those never served")
    d.add_argument("--url", required=True)
    d.add_argument("--json", action="store_true")
    d.add_argument("--timeout", type=float, default=10.0)
    d.set_defaults(func=cmd_documents)


def _call(args: argparse.Namespace, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
    token = os.environ.get(TOKEN_ENV)
    if not token:
        raise SystemExit(f"kbgate: set {TOKEN_ENV} to the admin token (kbgate admin-token makes one)")
    try:
        r = httpx.request(method, args.url.rstrip("/") + path, timeout=args.timeout,
                          headers={"authorization": f"Bearer {token}"},
                          content=None if body is None else orjson.dumps(body))
    except httpx.HTTPError as exc:
        raise SystemExit(f"kbgate: {args.url} did not answer ({type(exc).__name__})") from None
    try:
        data = orjson.loads(r.content)
    except orjson.JSONDecodeError:
        data = {}
    if r.status_code != 200:
        what = data.get("error") if isinstance(data, dict) else None
        raise SystemExit(f"kbgate: {path} answered HTTP {r.status_code}" + (f": {what}" if what else ""))
    return data


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M") if ts else "-"


def cmd_gaps(args: argparse.Namespace) -> int:
    """Print the gap groups (or file one). Exit 0; 1 when the server refuses; 2 for a GROUP
    shorter than MIN_GROUP_PREFIX characters (asked for more, the server is not called)."""
    if args.file is not None and len(args.file.strip()) < MIN_GROUP_PREFIX:
        print(f"kbgate: --file {args.file!r}: give the group's id, or at least its first {MIN_GROUP_PREFIX} "
              "characters as `kbgate gaps` lists them", file=sys.stderr)
        return 2
    if args.file:
        done = _call(args, "POST", "/admin/gaps/file", {"group": args.file})
        if args.json:
            print(orjson.dumps(done, option=orjson.OPT_INDENT_2).decode())
        else:
            state = f"updated (count {done.get('count')})" if done.get("deduped") else "created"
            print(f"improvement task {done.get('recordId')} {state} for group {done.get('group')}")
        return 0
    data = _call(args, "GET", "/admin/gaps.json")
    if args.json:
        print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        return 0
    groups = data.get("groups", [])
    if not groups:
        print("no knowledge gaps recorded")
        return 0
    print(f"{'group':12}  {'asked':>5} {'no hit':>6} {'low':>4} {'dist':>4}  {'last seen':16}  callers / routes")
    for g in groups:
        print(f"{g['id'][:12]:12}  {g['count']:>5} {g['no_answer']:>6} {g['low_score']:>4} {g['questions']:>4}  "
              f"{_when(g['last_seen']):16}  {', '.join(g['callers'])} / {', '.join(g['routes'])}")
        for q in g.get("examples", []):
            print(f"{'':14}“{q}”")
        for h in g.get("best_hits", []):
            print(f"{'':14}near miss: {h.get('title') or h['doc_id']} ({h.get('path', '')}, "
                  f"relevance {score_text(h.get('relevance', 0))}){_lacks(h)}")
        for h in g.get("near_misses", []):
            why = (f"under the floor {score_text(h.get('floor', 0))}" if h.get("why") == "floor"
                   else "outside the caller's scope")
            print(f"{'':14}nearest: {h.get('title') or h['doc_id']} ({h.get('path', '')}, "
                  f"relevance {score_text(h.get('relevance', 0))}, {why}){_lacks(h)}")
    return 0


def _lacks(h: dict[str, Any]) -> str:
    """'; lacks W1, W2' for a near miss with the question's words it lacks, else ''."""
    words = h.get("unmatched") or []
    return f"; lacks {', '.join(map(str, words))}" if words else ""


def cmd_documents(args: argparse.Namespace) -> int:
    """Print, per index, the served counts and the documents never served."""
    data = _call(args, "GET", "/admin/documents.json")
    if args.json:
        print(orjson.dumps(data, option=orjson.OPT_INDENT_2).decode())
        return 0
    for name, ix in data.get("indexes", {}).items():
        print(f"index {name}: {ix.get('documents')} document(s), {len(ix.get('never', []))} never served")
        for doc, n in sorted(ix.get("served", {}).items(), key=lambda kv: -kv[1]):
            print(f"  {n:>6}  {doc}")
        for doc in ix.get("never", []):
            print(f"  {0:>6}  {doc}")
    sys.stdout.flush()
    return 0
