"""gateway/console/routes_remove.py: a tenant route and an agent route removed from the console,
confirmed first, through the serialised config edit; a stale page and an unknown route refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.console.csrf import form_token
from gateway.core.config import load_config
from tests.support.admin_app import ADMIN, AS_OWNER, admin_app
from tests.support.configs import ADMIN_TOKEN
from tests.support.console import login

pytestmark = pytest.mark.anyio


async def test_a_tenant_route_is_removed_after_confirming(tmp_path: Path, private_index: Path, start_app: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    page = (await c.get("/admin/tenants/acme", headers=ADMIN)).text
    assert 'action="/admin/tenants/acme/routes/remove"' in page
    asked = await c.post("/admin/tenants/acme/routes/remove", headers=ADMIN | {"accept": "text/html"},
                         data={"first": "tech", "second": "software"})
    assert asked.status_code == 200  # a tool asks once; this Bearer admin is a tool: removed at once
    assert load_config(path).tenants["acme"].routes == ()
    again = await c.post("/admin/tenants/acme/routes/remove", headers=ADMIN,
                         data={"first": "tech", "second": "software"})
    assert again.status_code in (400, 404, 409) and "tenants.acme.routes" in again.text


async def test_an_owner_may_not_remove_routes_and_a_stale_page_is_refused(tmp_path: Path, private_index: Path,
                                                                         start_app: Any,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    refused = await c.post("/admin/agent/routes/remove", headers=AS_OWNER, data={"route": "support"})
    assert refused.status_code == 403
    stale = await c.post("/admin/agent/routes/remove", headers=ADMIN, data={"route": "support", "base": "0" * 64})
    assert stale.status_code == 409
    assert "support" in load_config(path).agent.routes
    last = await c.post("/admin/agent/routes/remove", headers=ADMIN, data={"route": "support"})
    assert last.status_code == 400 and "agent.clients.alice.routes" in last.text  # a client keeps a route
    added = await c.post("/admin/agent/routes", headers=ADMIN, data={"route": "more", "index": "docs",
                                                                    "client": "alice"})
    assert added.status_code == 200, added.text
    done = await c.post("/admin/agent/routes/remove", headers=ADMIN, data={"route": "support"})
    assert done.status_code == 200, done.text
    cfg = load_config(path)
    assert "support" not in cfg.agent.routes
    assert all("support" not in cl.policy.routes for cl in cfg.agent.clients.values())
    assert cfg.agent.clients["alice"].policy.routes == ("more",)


async def test_a_browser_confirms_before_a_route_goes(tmp_path: Path, private_index: Path, start_app: Any,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    logged = await login(c, "", ADMIN_TOKEN)
    assert logged.status_code == 303
    session = logged.cookies["kbgate_admin"]
    form = {"first": "tech", "second": "software", "csrf": form_token(session, "tenant-route-remove:acme")}
    asked = await c.post("/admin/tenants/acme/routes/remove", data=form)
    assert asked.status_code == 200 and 'name="confirm" value="1"' in asked.text
    assert len(load_config(path).tenants["acme"].routes) == 1  # nothing removed before the answer
    done = await c.post("/admin/tenants/acme/routes/remove", data=form | {"confirm": "1"})
    assert done.status_code == 303 and load_config(path).tenants["acme"].routes == ()
