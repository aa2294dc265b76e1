"""`kbgate try`: the command-line twin of /admin/try (gateway.console.try_), registered by gateway/cli.py.

Rationale: docs/design-notes.md, "gateway/console/try_cli.py".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import orjson

from gateway.console.callers import CALLERS
from gateway.console.scores import score_text
from gateway.console.try_view import dials_text

if TYPE_CHECKING:
    from gateway.console import try_
    from gateway.core.runtime import Runtime


def register(sub: Any) -> None:
    """Add `try` to the `kbgate` subparsers `sub`."""
    t = sub.add_parser("try", help="answer a question exactly as a caller would be answered, and say why")
    t.add_argument("--config", required=True)
    t.add_argument("--caller", required=True, choices=CALLERS)
    t.add_argument("--query", required=True)
    t.add_argument("--limit", type=int, help="Limit / limit / top_k (default: the caller's)")
    t.add_argument("--tenant", default="")
    t.add_argument("--first", default="", help="FirstLevelId")
    t.add_argument("--second", default="", help="SecondLevelId")
    t.add_argument("--client", default="", help="agent client id")
    t.add_argument("--token-id", default="")
    t.add_argument("--session", default="")
    t.add_argument("--on-behalf-of", default="")
    t.add_argument("--route", default="", help="knowledge route (Dify: knowledge_id; MCP: optional)")
    t.add_argument("--metadata-condition", help="Dify's metadata_condition object, as JSON")
    t.add_argument("--score-threshold", type=float, default=0.0)
    t.add_argument("--request-id", default="", help="the tool API caller's requestId")
    t.add_argument("--successor", default="", help="an index under indexes.dir to compare with, side by side")
    t.add_argument("--json", action="store_true")
    t.set_defaults(func=cmd_try)


def cmd_try(args: argparse.Namespace) -> int:
    """Run the try (and its successor) and print it. Returns the exit code."""
    from gateway.console import try_
    from gateway.core.config import load_config  # here, not at import: `kbgate --help` stays fast
    from gateway.core.errors import ConfigError, TryInvalid
    from gateway.core.runtime import Runtime

    try:
        condition = orjson.loads(args.metadata_condition) if args.metadata_condition else None
    except orjson.JSONDecodeError:
        return refused(args.json, "try_invalid", "--metadata-condition is not JSON")
    req = try_.TryRequest(caller=args.caller, query=args.query, limit=args.limit, tenant=args.tenant,
                          first=args.first, second=args.second, client=args.client, token_id=args.token_id,
                          session=args.session, on_behalf_of=args.on_behalf_of, route=args.route,
                          metadata_condition=condition, score_threshold=args.score_threshold,
                          request_id=args.request_id)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        return refused(args.json, exc.code, exc.message)
    try:
        # stdout is the try's answer alone (`--json`: one JSON document): the admin's audit line,
        # when [audit] sink = "stdout", and anything else the run prints go to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            results = asyncio.run(_run(Runtime(config), req, args.successor))
    except TryInvalid as exc:
        return refused(args.json, exc.code, exc.message)
    if args.json:
        out: Any = results[0] if len(results) == 1 else {"a": results[0], "b": results[1]}
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print("\n\n".join(render(r) for r in results))
    return 0


def refused(as_json: bool, code: str, message: str) -> int:
    """Say why a try was not run: `kbgate: MESSAGE` on stderr and, with --json, the error object
    {"error": {"code", "message"}} on stdout (stdout holds one JSON document in every case).
    Returns the exit code, 2."""
    print(f"kbgate: {message}", file=sys.stderr)
    if as_json:
        sys.stdout.write(orjson.dumps({"error": {"code": code, "message": message}}).decode() + "\n")
    return 2


async def _run(rt: Runtime, req: try_.TryRequest, successor: str) -> list[dict[str, Any]]:
    from gateway.console import try_

    try:
        out = [try_.to_json(await try_.run(rt, req))]
        if successor:
            out.append(try_.to_json(await try_.run(rt, replace(req, successor=successor))))
        return out
    finally:
        await rt.close()


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def _cut(v: float | None) -> str:
    """A relevance cut to 4 places (`gateway.console.scores`): never rounded up past a threshold."""
    return "-" if v is None else score_text(v, 4)


def cosine_line_text(line: dict[str, Any], index: str) -> str:
    """One line saying the cosine line a hybrid search judged on, where it came from, and for a
    line not measured for the index how to measure it (`kbgate index calibrate`)."""
    text = f"cosine line: {line['zero']:.4f} → relevance 0, {line['one']:.4f} → 1 ({line['source']}"
    if line["source"] == "measured":
        return text + ": measured on this index's vectors)"
    if line["source"] == "config":
        return text + ": cosine_zero / cosine_one in the config)"
    return text + f": the model's default, not measured for this index; measure it with kbgate index calibrate " \
                  f"--config FILE --index {index})"


def render(result: dict[str, Any]) -> str:
    """A `to_json` dict as text: the answer body, then per search its hits and dropped chunks."""
    lines = [f"{result['route']}{' -> ' + result['successor'] if result['successor'] else ''}: "
             f"HTTP {result['status']}, {result['total_ms']:.2f} ms",
             "stages: " + " · ".join(f"{k} {v:.2f} ms" for k, v in result["stages_ms"].items()),
             "answer body:", result["body"]]
    for s in result["searches"]:
        lines.append(f"search {s['index']} at commit {s['generation']}: cache {s['cache']}, limit {s['limit']}, "
                     f"relevance floor {s['floor']}, metadata conditions {s['metadata_conditions']}")
        lines.append(f"  scope: datasets {s['scope'].get('datasets')}, paths {s['scope'].get('path_globs')}")
        if s.get("cosine_line"):
            lines.append("  " + cosine_line_text(s["cosine_line"], s["index"]))
        if s.get("answered"):
            lines.append(f"  answered: {s['answered']}" + ("" if s["answered"] == "hybrid" else
                         " (the query embedding did not answer in time: this answer is BM25's alone)"))
        if s.get("dials"):
            lines.append(f"  dials: {dials_text(s['dials'])}")
        lines.append("  #  score     relevance bm25      dense     fused     rerank    id [heading] terms")
        for h in s["kept"]:
            sc = h["scores"]
            heading = f" [{h['heading']}]" if h["heading"] else ""
            lines.append(f"  {h['rank']:<2} {_n(h['score']):<9} {_cut(h['relevance']):<9} {_n(sc['bm25']):<9} "
                         f"{_n(sc['dense']):<9} {_n(sc['fused']):<9} {_n(sc['rerank']):<9} {h['id']}{heading} "
                         + " · ".join(h["terms"]))
        if not s["kept"]:
            lines.append("  (no hit)")
        for d in s["dropped"]:
            by = f" (by {d['by']})" if d["by"] else ""
            lines.append(f"  dropped {d['reason']}{by}: {d['id']} score {_n(d['score'])}")
    for m in result["merged_out"]:
        lines.append(f"left out by the merge: {m['id']} ({m['reason']}, route {m['route']})")
    return "\n".join(lines)
