"""Server-rendered HTML of the deliveries page and the login form.

No external assets (inline CSS only, allowed by the page's CSP), `<meta charset="utf-8">`,
and every value passes through `escape` (FirstLevelId, key ids, outcomes... all
arrive from outside): `html.escape`, then every control character but tab and line breaks,
every format character (zero-width, bidi overrides such as U+202E) and non-character shown as
a visible escape (`\\x1b`, `\\u202e`), so a caller's SecondLevelId cannot put raw ESC bytes in
the page nor reorder what an operator reads. Secrets never reach here: records hold key ids only; the Query
column exists only when `admin.show_queries` is on.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from html import escape as html_escape
from typing import Any

from indexes.invisible import shown

CSS = """
body{font:14px/1.45 system-ui,"WenQuanYi Micro Hei",sans-serif;margin:1.5rem;color:#1d232a;background:#fafbfc}
h1{font-size:1.3rem;margin:0 0 .8rem}h2{font-size:1.05rem;margin:1.4rem 0 .4rem}
form.filters{display:flex;gap:.8rem;align-items:end;flex-wrap:wrap;margin-bottom:.6rem}
label{display:flex;flex-direction:column;font-size:.8rem;color:#4a5560}
select,input,button{font:inherit;padding:.25rem .4rem}
table{border-collapse:collapse;width:100%;background:#fff;margin-bottom:.4rem}
th,td{border:1px solid #dde2e7;padding:.3rem .5rem;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.ok td.outcome{color:#176c2f}tr.fail td.outcome{color:#b3261e;font-weight:600}
.muted{color:#6b7680}.note{background:#fff6db;border:1px solid #ead38a;padding:.4rem .6rem}
.error{background:#fde8e6;border:1px solid #e6a19a;padding:.4rem .6rem}
"""

def escape(value: str) -> str:
    """`value` as HTML text or attribute value (`html.escape`, quotes too), with control,
    format and non-characters written as visible escapes (`indexes.invisible.shown`, as every
    CLI report line): 'a\\x1bb' → 'a\\\\x1bb' (shown as a\\x1bb), U+202E → '\\\\u202e'. Tab, line feed
    and carriage return are kept."""
    return shown(html_escape(value), lines=True)


OUTCOME_FILTERS = ("", "ok", "failed")  # plus any exact reason of gateway.core.errors.RET_TABLE


def _page(title: str, body: str) -> str:
    return (
        '<!DOCTYPE html>\n<html lang="zh-CN"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def login_page(message: str | None = None) -> str:
    """The login form (POST /admin/login, field `token`); `message` is shown above it."""
    msg = f'<p class="error" role="alert">{escape(message)}</p>' if message else ""
    return _page("kbgate admin: log in", (
        "<h1>kbgate admin</h1>" + msg +
        '<form method="post" action="/admin/login">'
        '<label>Admin token <input type="password" name="token" autocomplete="current-password" '
        'required autofocus></label> <button type="submit">Log in</button></form>'
    ))


def _when(ts: Any) -> str:
    if not isinstance(ts, int | float):
        return "-"
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(v: Any, cls: str = "") -> str:
    text = "-" if v is None or v == "" else str(v)
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(text)}</td>"


def _ms(v: Any) -> str:
    return f"{v:.1f}" if isinstance(v, int | float) else "-"


def deliveries_table(rows: Sequence[Mapping[str, Any]], *, show_queries: bool) -> str:
    """One <table> of delivery records (newest first), or a 'none yet' line."""
    if not rows:
        return '<p class="muted">No deliveries recorded.</p>'
    head = ["Time", "Tenant", "FirstLevelId", "SecondLevelId", "Outcome", "Ret", "HTTP", "Signature",
            "Key id", "Latency ms", "Results", "Request id"]
    if show_queries:
        head.append("Query")
    out = ["<table><thead><tr>", *(f"<th>{h}</th>" for h in head), "</tr></thead><tbody>"]
    for r in rows:
        ok = r.get("outcome") == "ok"
        sig = r.get("signature") or "-"
        if r.get("signature_reason"):
            sig = f"{sig} ({r['signature_reason']})"
        out.append(f'<tr class="{"ok" if ok else "fail"}" data-request-id="{escape(str(r.get("request_id", "")))}">')
        out += [
            _cell(_when(r.get("received_at"))), _cell(r.get("tenant")), _cell(r.get("first_level_id")),
            _cell(r.get("second_level_id")), _cell(r.get("outcome"), "outcome"), _cell(r.get("ret"), "num ret"),
            _cell(r.get("status"), "num"), _cell(sig), _cell(r.get("key_id")),
            _cell(_ms(r.get("latency_ms")), "num"), _cell(r.get("results"), "num"), _cell(r.get("request_id")),
        ]
        if show_queries:
            out.append(_cell(r.get("query")))
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def deliveries_page(
    sections: Iterable[tuple[str, Sequence[Mapping[str, Any]]]],
    *,
    tenants: Sequence[str],
    outcomes: Sequence[str],
    tenant: str,
    outcome: str,
    n: int,
    show_queries: bool,
    shared: bool,
    error: str | None = None,
) -> str:
    """The deliveries page: filter form, then one table per tenant (last `n` each).

    sections: (tenant name, records newest first). tenants/outcomes: choices of the
    filter selects. tenant/outcome/n: the current filter. shared: the record is in Redis
    (all workers) rather than this worker's memory.
    """
    def options(values: Sequence[str], current: str, all_label: str) -> str:
        opts = [f'<option value=""{" selected" if current == "" else ""}>{escape(all_label)}</option>']
        for v in values:
            sel = " selected" if v == current else ""
            opts.append(f'<option value="{escape(v)}"{sel}>{escape(v)}</option>')
        return "".join(opts)

    where = "Redis (every worker)" if shared else "this worker's memory only (no replay.redis_url)"
    parts = [
        '<h1>kbgate: recent deliveries</h1>',
        f'<p class="muted">Last {n} callbacks per tenant, newest first. Record kept in {escape(where)}. '
        f'Query text {"shown (admin.show_queries = true)" if show_queries else "hidden"}. '
        'Secrets are never recorded.</p>',
        '<form class="filters" method="get" action="/admin/">',
        f'<label>Tenant <select name="tenant">{options(tenants, tenant, "all tenants")}</select></label>',
        f'<label>Outcome <select name="outcome">{options(outcomes, outcome, "all outcomes")}</select></label>',
        f'<label>Rows <input type="number" name="n" min="1" max="500" value="{n}"></label>',
        '<button type="submit">Filter</button></form>',
        '<form method="post" action="/admin/logout"><button type="submit">Log out</button></form>',
    ]
    if error:
        parts.append(f'<p class="error" role="alert">{escape(error)}</p>')
    for name, rows in sections:
        parts.append(f'<section data-tenant="{escape(name)}"><h2>Tenant {escape(name)}</h2>')
        parts.append(deliveries_table(rows, show_queries=show_queries))
        parts.append("</section>")
    return _page("kbgate: deliveries", "".join(parts))
