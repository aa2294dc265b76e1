"""Server-rendered HTML of /admin/gaps and /admin/documents (same frame, CSS and escaping as
the deliveries page, gateway.console.page). Question text appears only in a group's
examples, which are empty unless admin.show_queries is on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

from gateway.console.gaps.groups import Group
from gateway.console.page import _page as page

__all__ = ["NAV", "documents_page", "gaps_page", "page"]

NAV = ('<nav class="muted"><a href="/admin/">deliveries</a> · <a href="/admin/gaps">knowledge gaps</a> · '
       '<a href="/admin/documents">documents served</a> · <a href="/admin/try">try a question</a></nav>')


def _when(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M UTC") if ts else "-"


def _counts(c: Mapping[str, int]) -> str:
    return ", ".join(f"{escape(k)}: {n}" for k, n in c.items()) or "-"


def gaps_page(groups: Sequence[Group], *, csrf: str, show_queries: bool, shared: bool, threshold: float,
              filed: Mapping[str, Any] | None = None, error: str | None = None) -> str:
    """The gap groups, most asked first, each with a "File improvement task" form (POST
    /admin/gaps/file, fields `group` and `csrf`). filed: the result of a filing just done."""
    where = "Redis (every worker and replica)" if shared else "this worker's memory only (no replay.redis_url)"
    parts = [
        NAV, "<h1>kbgate: knowledge gaps</h1>",
        f'<p class="muted">Questions answered with no hit, or whose best hit\'s relevance was under the route\'s '
        f"gap threshold (default {threshold:.2f} on the 0..1 scale). Grouped by normalized form and near-duplicates "
        f"of the analysed terms. Record kept in {escape(where)}. Question text "
        f'{"kept and shown (admin.show_queries = true)" if show_queries else "not kept: keyed hashes and counts only"}'
        '. Fix a gap with a synonym (the index\'s synonyms file) or a new page, then try the question again.</p>',
    ]
    if error:
        parts.append(f'<p class="error" role="alert">{escape(error)}</p>')
    if filed is not None:
        verb = "updated (filed before; count now " + str(filed.get("count")) + ")" if filed.get("deduped") \
            else "created"
        parts.append(f'<p class="note" role="status" data-record="{escape(str(filed.get("recordId")))}">'
                     f'Improvement task {escape(str(filed.get("recordId")))} {escape(verb)}.</p>')
    if not groups:
        parts.append('<p class="muted">No knowledge gaps recorded.</p>')
        return page("kbgate: knowledge gaps", "".join(parts))
    head = ["Group", "Asked", "No hit", "Low score", "Distinct", "Per day", "Callers", "Routes", "First seen",
            "Last seen", "Best hits"]
    if show_queries:
        head.append("Example questions")
    head.append("")
    parts += ['<table class="gaps"><thead><tr>', *(f"<th>{h}</th>" for h in head), "</tr></thead><tbody>"]
    for g in groups:
        best = "<br>".join(f'{escape(h.get("title") or h["doc_id"])} <span class="muted">'
                           f'{escape(h.get("path", ""))} · {float(h.get("relevance", 0)):.2f}</span>'
                           for h in g.best) or '<span class="muted">none</span>'
        cells = [f"<td><code>{escape(g.id[:12])}</code></td>", f'<td class="num asked">{g.count}</td>',
                 f'<td class="num no-hit">{g.no_answer}</td>', f'<td class="num low">{g.low_score}</td>',
                 f'<td class="num distinct">{g.questions}</td>', f"<td>{_counts(dict(sorted(g.days.items())))}</td>",
                 f'<td class="callers">{_counts(dict(g.callers.most_common()))}</td>',
                 f'<td class="routes">{_counts(dict(g.routes.most_common()))}</td>',
                 f"<td>{_when(g.first)}</td>", f"<td>{_when(g.last)}</td>", f"<td>{best}</td>"]
        if show_queries:
            cells.append('<td class="examples">' + "<br>".join(escape(q) for q in g.examples) + "</td>")
        cells.append('<td><form method="post" action="/admin/gaps/file">'
                     f'<input type="hidden" name="group" value="{escape(g.id)}">'
                     f'<input type="hidden" name="csrf" value="{escape(csrf)}">'
                     '<button type="submit">File improvement task</button></form></td>')
        parts.append(f'<tr data-group="{escape(g.id)}">' + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return page("kbgate: knowledge gaps", "".join(parts))


def documents_page(indexes: Sequence[tuple[str, list[tuple[str, str, int]], int | None]], *, days: int,
                   shared: bool, error: str | None = None) -> str:
    """Per index: (name, [(doc id, title, times served)] most served first then never served,
    documents in the index or None when it cannot be opened)."""
    where = "Redis (every worker and replica)" if shared else "this worker's memory only"
    parts = [NAV, "<h1>kbgate: documents served</h1>",
             f'<p class="muted">How often each document was handed to any caller in the last {days} day(s) '
             f"(gaps.keep_days); documents never served in that window may be stale or unreachable. "
             f"Counts kept in {escape(where)}.</p>"]
    if error:
        parts.append(f'<p class="error" role="alert">{escape(error)}</p>')
    for name, rows, total in indexes:
        never = sum(1 for _, _, n in rows if n == 0)
        parts.append(f'<section data-index="{escape(name)}"><h2>Index {escape(name)}</h2>')
        if total is None:
            parts.append('<p class="error">The index cannot be opened.</p></section>')
            continue
        parts.append(f'<p class="muted">{total} document(s); <span class="never-count">{never}</span> never served.'
                     "</p><table><thead><tr><th>Document</th><th>Title</th><th>Served</th></tr></thead><tbody>")
        for doc, title, n in rows:
            cls = "never" if n == 0 else "served"
            parts.append(f'<tr class="{cls}" data-doc="{escape(doc)}"><td><code>{escape(doc)}</code></td>'
                         f'<td>{escape(title)}</td><td class="num">{n}</td></tr>')
        parts.append("</tbody></table></section>")
    return page("kbgate: documents served", "".join(parts))
