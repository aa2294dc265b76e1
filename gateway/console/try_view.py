"""Server-rendered HTML of `/admin/try`: the form and, per side, the answer and its trace.

Inline CSS only (the admin CSP), `<meta charset="utf-8">`, every value through `html.escape`.
The question is shown back only inside the admin's own form (it is the admin's input); it is
never logged. Numbers carry `data-*` attributes so tests read them exactly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gateway.console.csrf import FIELD
from gateway.console.page import CSS, escape
from gateway.console.try_ import CALLERS

TRY_CSS = CSS + """
form.try{display:grid;grid-template-columns:1fr 1fr;gap:.6rem 1.2rem;margin-bottom:1rem}
form.try fieldset{border:1px solid #dde2e7;background:#fff;display:flex;flex-wrap:wrap;gap:.5rem}
form.try .shared{grid-column:1/3;display:flex;gap:.8rem;align-items:end}
form.try .shared label:first-child{flex:1}
.sides{display:grid;grid-template-columns:repeat(auto-fit,minmax(560px,1fr));gap:1.2rem}
pre.body{white-space:pre-wrap;word-break:break-all;background:#fff;border:1px solid #dde2e7;padding:.4rem;
max-height:14rem;overflow:auto;font-size:12px}
.terms{color:#176c2f}.reason{font-weight:600}
"""

REASONS = {
    "floor": "relevance under the route's floor",
    "rerank_threshold": "reranker's score under the route's rerank threshold",
    "scope": "outside the scope (re-check)",
    "one_per_document": "another chunk of a document already answered",
    "outside_scope": "outside the caller's scope",
    "metadata_condition": "excluded by a metadata condition",
    "limit": "ranked after the last answer (limit)",
    "merged": "the same document, answered by another route",
}


def _page(title: str, body: str) -> str:
    return ('<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{escape(title)}</title><style>{TRY_CSS}</style></head><body>{body}</body></html>\n")


def _num(v: float | None, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _input(form: Mapping[str, str], name: str, label: str, *, options: Sequence[str] = (), size: int = 12) -> str:
    listed = f' list="l-{name}"' if options else ""
    datalist = (f'<datalist id="l-{name}">' + "".join(f'<option value="{escape(o)}">' for o in options)
                + "</datalist>") if options else ""
    return (f'<label>{escape(label)}<input name="{name}" size="{size}" value="{escape(form.get(name, ""))}"'
            f"{listed}>{datalist}</label>")


def _side_form(form: Mapping[str, str], p: str, choices: Mapping[str, Sequence[str]], legend: str) -> str:
    picked = form.get(p + "caller", "volcengine" if p == "a_" else "")
    opts = "" if p == "a_" else '<option value="">(none)</option>'
    opts += "".join(f'<option value="{c}"{" selected" if c == picked else ""}>{c}</option>' for c in CALLERS)
    return (f'<fieldset data-side="{p[0]}"><legend>{escape(legend)}</legend>'
            f'<label>Caller<select name="{p}caller">{opts}</select></label>'
            + _input(form, p + "tenant", "Tenant", options=choices.get("tenant", ()))
            + _input(form, p + "first", "FirstLevelId", options=choices.get("first", ()))
            + _input(form, p + "second", "SecondLevelId", options=choices.get("second", ()))
            + _input(form, p + "client", "Agent client", options=choices.get("client", ()))
            + _input(form, p + "route", "Route / knowledge_id", options=choices.get("route", ()))
            + _input(form, p + "metadata_condition", "Dify metadata_condition (JSON)", size=30)
            + _input(form, p + "score_threshold", "Dify score_threshold", size=5)
            + _input(form, p + "successor", "Search index instead", options=choices.get("successor", ()))
            + "</fieldset>")


def _hits(search: Mapping[str, Any]) -> str:
    rows = []
    for h in search["kept"]:
        s = h["scores"]
        rows.append(
            f'<tr class="kept" data-id="{escape(h["id"])}" data-score="{h["score"]!r}" '
            f'data-relevance="{h["relevance"]!r}"><td class="num">{h["rank"]}</td>'
            f'<td>{escape(h["title"])}<div class="muted">{escape(h["id"])} · chunk {h["chunk"]}'
            f'{" · " + escape(h["path"]) if h["path"] else ""}</div></td><td>{escape(h["heading"]) or "-"}</td>'
            f'<td class="num score">{_num(h["score"])}</td><td class="num relevance">{_num(h["relevance"])}</td>'
            f'<td class="num">{_num(s["bm25"])}</td><td class="num">{_num(s["dense"])}</td>'
            f'<td class="num">{_num(s["fused"])}</td><td class="num">{_num(s["rerank"])}</td>'
            f'<td class="terms">{escape(" · ".join(h["terms"])) or "-"}</td></tr>')
    head = ("<tr><th>#</th><th>Document · chunk</th><th>Heading</th><th>Score</th><th>Relevance</th><th>BM25</th>"
            "<th>Dense</th><th>Fused</th><th>Rerank</th><th>Matched terms</th></tr>")
    body = "".join(rows) or '<tr><td colspan="10" class="muted">No hit.</td></tr>'
    return f'<table class="hits"><thead>{head}</thead><tbody>{body}</tbody></table>'


def _dropped(search: Mapping[str, Any]) -> str:
    if not search["dropped"]:
        return ""
    rows = "".join(
        f'<tr class="dropped" data-reason="{escape(d["reason"])}" data-id="{escape(d["id"])}">'
        f'<td>{escape(d["title"])}<div class="muted">{escape(d["id"])}</div></td>'
        f'<td class="num">{_num(d["score"])}</td><td class="num">{_num(d["relevance"])}</td>'
        f'<td class="reason">{escape(REASONS.get(d["reason"], d["reason"]))}'
        f'{" (" + escape(d["by"]) + ")" if d["by"] else ""}</td></tr>' for d in search["dropped"])
    return ('<details><summary>Not in the answer, and why</summary><table class="dropped">'
            f"<thead><tr><th>Chunk</th><th>Score</th><th>Relevance</th><th>Why</th></tr></thead><tbody>{rows}</tbody></table></details>")


def _expansions(search: Mapping[str, Any]) -> str:
    """Which of the owner's synonyms fired (docs/knowledge-owners.md, "Synonyms")."""
    fired = search.get("expansions") or []
    if not fired:
        return '<p class="muted expansions">Synonyms: none fired</p>'
    pairs = ", ".join(f'<span class="expansion">{escape(e["term"])} → {escape(e["synonym"])}</span>'
                      for e in fired)
    return f'<p class="expansions">Synonyms that fired: {pairs}</p>'


def dials_text(dials: Mapping[str, Any]) -> str:
    """The retrieval dials a search used (`gateway.core.explain.effective_dials`) as one line of
    text, 'dense_share 0.5 · candidates 30 · rerank off · neighbours 1 (set by the route: ...)';
    '' when there are none."""
    shown = [f"{k} {('on' if v else 'off') if isinstance(v, bool) else '-' if v is None else v}"
             for k, v in dials.items() if k != "route"]
    route = dials.get("route") or []
    return " · ".join(shown) + (f" (set by the route: {', '.join(route)})" if route else " (the index's)")


def _dials(search: Mapping[str, Any]) -> str:
    dials = search.get("dials") or {}
    return f'<p class="dials">Retrieval dials: {escape(dials_text(dials))}</p>' if dials else ""


def _search(search: Mapping[str, Any]) -> str:
    scope = search["scope"]
    stages = " · ".join(f"{escape(k)} {v:.2f} ms" for k, v in search["stages_ms"].items())
    return (f'<section class="search" data-index="{escape(search["index"])}">'
            f'<p>Index <b>{escape(search["index"])}</b> at commit <span class="generation">'
            f'{search["generation"]}</span> · cache <b class="cache">{escape(search["cache"])}</b> · limit '
            f'<span class="limit">{search["limit"]}</span> · relevance floor {search["floor"]}'
            f' · metadata conditions {search["metadata_conditions"]}</p>'
            f'<p class="muted">Scope: datasets {escape(str(scope.get("datasets")))}, paths '
            f'{escape(str(scope.get("path_globs")))} · {stages}</p>'
            + _dials(search) + _expansions(search) + _hits(search) + _dropped(search) + "</section>")


def _side(prefix: str, result: Mapping[str, Any] | str) -> str:
    side = prefix[0]
    if isinstance(result, str):
        return f'<div class="side" data-side="{side}"><p class="error" role="alert">{escape(result)}</p></div>'
    stages = " · ".join(f"{escape(k)} {v:.2f} ms" for k, v in result["stages_ms"].items())
    searches = "".join(_search(s) for s in result["searches"]) or '<p class="muted">No search was made.</p>'
    merged = ""
    if result["merged_out"]:
        merged = "<p class=muted>Left out by the merge of routes: " + ", ".join(
            f'{escape(m["title"])} ({escape(REASONS.get(m["reason"], m["reason"]))})'
            for m in result["merged_out"]) + "</p>"
    return (f'<div class="side" data-side="{side}"><h2>{escape(result["route"])}'
            f'{" → " + escape(result["successor"]) if result["successor"] else ""}</h2>'
            f'<p>HTTP <b class="status">{result["status"]}</b> · {result["total_ms"]:.2f} ms · {stages}</p>'
            f'<p class="muted">The answer body the caller gets:</p><pre class="body">{escape(result["body"])}</pre>'
            + searches + merged + "</div>")


def try_page(form: Mapping[str, str], sides: Sequence[tuple[str, Mapping[str, Any] | str]], *, csrf: str,
             choices: Mapping[str, Sequence[str]]) -> str:
    """The page: the form (filled with `form`), then each side's result (a `to_json` dict) or
    its error message. csrf: the form's `csrf` value ('' when Bearer-authenticated)."""
    form_html = (
        '<form class="try" method="post" action="/admin/try">'
        f'<input type="hidden" name="{FIELD}" value="{escape(csrf)}">'
        '<div class="shared"><label>Question<input name="query" required maxlength="2000" '
        f'value="{escape(form.get("query", ""))}"></label>'
        f'<label>Limit / top_k<input name="limit" size="4" value="{escape(form.get("limit", ""))}"></label>'
        '<button type="submit">Try</button></div>'
        + _side_form(form, "a_", choices, "Caller A") + _side_form(form, "b_", choices, "Caller B (optional)")
        + "</form>")
    results = "".join(_side(p, r) for p, r in sides)
    return _page("kbgate admin: try a question", (
        '<h1>kbgate: try a question as a caller</h1>'
        '<p class="muted">The same code path as the caller: the answer below is the body it would get. '
        'A try is audited as yours; it is not a delivery, claims no nonce, counts in no metric. '
        '<a href="/admin/">Deliveries</a></p>' + form_html + f'<div class="sides">{results}</div>'))
