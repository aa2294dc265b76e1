"""Adding a tenant (its key generated and shown once), a tenant route and an agent route from
the console (gateway/console/tenants_edit.py): admins only, through the serialised config edit,
refusals naming the key and changing nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config
from gateway.core.config.edit import file_digest
from indexes.store import IndexStore
from tests.support.admin_app import ADMIN, AS_OWNER, admin_app
from tests.support.console import login

pytestmark = pytest.mark.anyio


async def test_an_admin_adds_a_tenant_and_sees_its_key_once(tmp_path: Path, private_index: Path, start_app: Any,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    assert (await login(c)).status_code == 303
    page = await c.get("/admin/tenants")
    assert 'id="tenant-add"' in page.text and 'id="agent-route-add"' in page.text
    form = page.text.split('id="tenant-add"')[1]
    csrf, base = (form.split(f'name="{k}" value="')[1].split('"')[0] for k in ("csrf", "base"))
    r = await c.post("/admin/tenants", data={"csrf": csrf, "base": base, "name": "newt"})
    assert r.status_code == 303 and r.headers["location"].startswith("/admin/tenants/newt?shown="), r.text[-500:]
    t = load_config(path).tenants["newt"]
    assert t.path == "/volcengine/newt" and t.verify == "enforce" and len(t.secrets) == 1
    shown = await c.get(r.headers["location"])
    secret = shown.text.split('class="secret-value">')[1].split("<")[0]
    assert secret == t.secrets[0].value.reveal() and len(secret) >= 32
    again = await c.get(r.headers["location"])
    assert secret not in again.text and 'id="new-key"' in again.text  # shown once
    r = await c.post("/admin/tenants", data={"csrf": csrf, "base": base, "name": "other"})
    assert r.status_code == 409 and "other" not in load_config(path).tenants  # the page was stale
    before = path.read_text("utf-8")
    for name, key in (("newt", "tenants.newt"), ("a b", "tenants.a b")):
        r = await c.post("/admin/tenants", headers=ADMIN, data={"name": name})
        assert r.status_code == 400 and key in r.json()["error"], r.text
    r = await c.post("/admin/tenants", headers=AS_OWNER, data={"name": "x"})
    assert r.status_code == 403 and path.read_text("utf-8") == before
    assert gw.reloader.reload("file") == "reloaded" and "newt" in gw.runtime.config.tenants


async def test_routes_for_a_tenant_and_for_an_agent_client(tmp_path: Path, private_index: Path, start_app: Any,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    IndexStore(private_index).create_or_open_for_write("hr").close()
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    page = await c.get("/admin/tenants/acme", headers=ADMIN)
    assert 'id="route-add"' in page.text and '<option value="hr">' in page.text
    assert 'id="route-add"' not in (await c.get("/admin/tenants/acme", headers=AS_OWNER)).text
    before = path.read_text("utf-8")
    bad = [({"first": "hr", "second": "leave", "index": "nope"}, "tenants.acme.routes.index"),
           ({"first": "tech", "second": "software", "index": "hr"}, "tenants.acme.routes"),
           ({"first": "", "second": "x", "index": "hr"}, "tenants.acme.routes")]
    for data, key in bad:
        r = await c.post("/admin/tenants/acme/routes", headers=ADMIN, data=data)
        assert r.status_code == 400 and key in r.json()["error"], (data, r.text)
    r = await c.post("/admin/tenants/nobody/routes", headers=ADMIN, data={"first": "a", "second": "b", "index": "hr"})
    assert r.status_code == 400 and "tenants.nobody" in r.json()["error"]
    assert path.read_text("utf-8") == before
    r = await c.post("/admin/tenants/acme/routes", headers=ADMIN,
                     data={"first": "hr", "second": "leave", "index": "hr", "base": file_digest(path) or ""})
    assert r.status_code == 200, r.text
    assert [(x.first_level_id, x.second_level_id, x.index) for x in load_config(path).tenants["acme"].routes] == \
        [("tech", "software", "docs"), ("hr", "leave", "hr")]

    r = await c.post("/admin/agent/routes", headers=ADMIN, data={"route": "hr", "index": "hr", "client": "nobody"})
    assert r.status_code == 400 and "agent.clients.nobody" in r.json()["error"]
    r = await c.post("/admin/agent/routes", headers=ADMIN, data={"route": "support", "index": "hr"})
    assert r.status_code == 400 and "agent.routes.support" in r.json()["error"]
    r = await c.post("/admin/agent/routes", headers=ADMIN, data={"route": "hr", "index": "hr", "client": "alice"})
    assert r.status_code == 200, r.text
    config = load_config(path)
    assert config.agent.routes["hr"].index == "hr" and config.agent.clients["alice"].policy.routes == ("support", "hr")
    listed = await c.get("/admin/tenants", headers=ADMIN)
    assert 'data-route="hr"' in listed.text
