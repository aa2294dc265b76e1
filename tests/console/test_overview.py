"""/admin/ overview and its JSON twin through the app: every route with readiness, commit,
documents and chunks; questions per day with the no-answer and low-score counts; each tenant
key's last use; refused deliveries of the last hour by reason; the chart as SVG with no
external reference; never question text."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from tests.console.test_users import users_config
from tests.support.callbacks import body, signed
from tests.support.configs import ADMIN_TOKEN, ENV, SECRET_ACME, TOKEN_ALICE, write
from tests.support.documents import AGENT_DOCS, KB_DOCS

pytestmark = pytest.mark.anyio
AUTH = {"authorization": f"Bearer {ADMIN_TOKEN}"}
MISS = "火星基地的氧气配额是多少"


async def _app(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch,
               show_queries: bool = False) -> tuple[httpx.AsyncClient, Any]:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    data = users_config(tmp_path, docs_index, show_queries=show_queries)
    c, gw, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    return c, gw


async def _callback(c: httpx.AsyncClient, secret: str, query: str) -> None:
    raw = body(query=query)
    await c.post("/volcengine/acme", content=raw, headers=signed(secret, raw))


@pytest.mark.parametrize("show_queries", [False, True])
async def test_the_overview_shows_every_route_and_what_happened(tmp_path: Path, docs_index: Path, start_app: Any,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                show_queries: bool) -> None:
    c, gw = await _app(tmp_path, docs_index, start_app, monkeypatch, show_queries)
    await _callback(c, SECRET_ACME, "密钥轮换")  # answered
    await _callback(c, SECRET_ACME, MISS)  # no answer
    await _callback(c, "not-the-acme-secret-at-all", "x")  # refused: signature_mismatch
    r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                     json={"knowledge_id": "other", "query": MISS, "retrieval_setting": {"top_k": 3}})
    assert r.status_code == 200
    await gw.deliveries.flush()

    o = (await c.get("/admin/overview.json", headers=AUTH)).json()
    routes = {r["id"]: r for r in o["routes"]}
    assert set(routes) == {"acme/tech/software", "support", "other"}
    assert routes["acme/tech/software"]["callers"] == ["Volcengine tenant acme"]
    assert routes["other"]["callers"] == ["alice: Dify"]
    ready = (await c.get("/readyz")).json()
    for r in ready["routes"]:
        mine = next(x for x in o["routes"] if x["route"] == r["route"])
        assert (mine["state"], mine["commit"], mine["index"]) == (r["state"], r["commit"], r["index"])
    for name in ("docs", "kb"):
        ix = o["indexes"][name]
        assert ix["documents"] > 0 and ix["chunks"] >= ix["documents"] and ix["last_commit"]
        hidden = sum(not d.qa_visible for d in (AGENT_DOCS if name == "docs" else KB_DOCS))
        assert ix["disabled_documents"] == hidden  # qa_visible off: served to no caller
    q = o["questions"]
    assert len(q["days"]) == 30 and q["days"] == sorted(q["days"])
    assert (q["total"][-1], q["no_answer"][-1]) == (3, 2)
    assert q["no_answer_rate"][-1] == round(2 / 3, 4) and q["total"][0] == 0 and q["no_answer_rate"][0] is None
    assert (routes["acme/tech/software"]["questions"], routes["other"]["questions"]) == (2, 1)
    keys = {k["key_id"]: k for k in o["keys"]}
    assert keys["acme-2026-11"]["last_used"] and keys["acme-2026-11"]["count"] == 2
    assert keys["acme-2026-10"]["last_used"] is None
    assert o["refused_last_hour"]["by_reason"] == {"signature_mismatch": 1} and o["errors"] == []

    html = (await c.get("/admin/", headers=AUTH)).text
    assert 'data-route="acme/tech/software"' in html and 'data-reason="signature_mismatch"' in html
    assert '<img class="chart" src="/admin/overview/chart.svg"' in html
    svg = await c.get("/admin/overview/chart.svg", headers=AUTH)
    assert svg.status_code == 200 and svg.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in svg.text and "src=" not in svg.text and 'href="http' not in svg.text
    for text in (html, svg.text, str(o)):  # no question text anywhere, whatever show_queries says
        assert MISS not in text and "密钥轮换" not in text


async def test_the_overview_needs_a_login_and_any_role_reads_it(tmp_path: Path, docs_index: Path, start_app: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c, _ = await _app(tmp_path, docs_index, start_app, monkeypatch)
    assert (await c.get("/admin/overview.json")).status_code == 401
    assert (await c.get("/admin/overview/chart.svg")).status_code == 401
    r = await c.get("/admin/")
    assert r.status_code == 303 and r.headers["location"] == "/admin/login"  # a monitor sees a redirect
    assert (await c.get("/admin/login")).status_code == 200 and 'name="token"' in (await c.get("/admin/login")).text
    assert (await c.get("/admin/", headers={"accept": "application/json"})).status_code == 401
    from tests.console.test_users import VIEWER
    viewer = {"authorization": f"Bearer vera:{VIEWER}"}
    assert (await c.get("/admin/overview.json", headers=viewer)).status_code == 200
    legacy = await c.get("/admin/?tenant=acme&outcome=failed", headers=AUTH)
    assert legacy.status_code == 303 and legacy.headers["location"] == "/admin/deliveries?tenant=acme&outcome=failed"
