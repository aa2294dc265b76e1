"""Changing a user's role and removing a user from the Users page (gateway/console/users_edit.py):
admins only, through the serialised config edit, a stale page refused 409, removal confirmed
first, refusals naming the key, an owner of an index no route names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.config import load_config
from gateway.core.config.edit import file_digest
from indexes.store import IndexStore
from tests.support.admin_app import ADMIN, AS_OWNER, OWNER, VIEWER, admin_app
from tests.support.console import login

pytestmark = pytest.mark.anyio


def _users(path: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {u.name: (u.role, u.indexes) for u in load_config(path).admin.users}


async def test_an_admin_changes_a_role_and_gives_an_unrouted_index_an_owner(
        tmp_path: Path, private_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    IndexStore(private_index).create_or_open_for_write("hr").close()  # an index no route names
    c, _, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    page = await c.get("/admin/users", headers=ADMIN)
    assert 'id="user-role"' in page.text and 'name="index.hr"' in page.text
    before = path.read_text("utf-8")
    r = await c.post("/admin/users/role", headers=AS_OWNER, data={"name": "vera", "role": "admin"})
    assert r.status_code == 403 and "owner of docs" in r.json()["error"] and path.read_text("utf-8") == before
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "owner"})
    assert r.status_code == 400 and "admin.users.vera.indexes" in r.json()["error"]
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "owner", "index.nope": "1"})
    assert r.status_code == 400 and "admin.users.vera.indexes" in r.json()["error"]
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "nobody", "role": "viewer"})
    assert r.status_code == 400 and "admin.users.nobody" in r.json()["error"]
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "boss"})
    assert r.status_code == 400 and "admin.users.vera.role" in r.json()["error"]
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "owner", "index.hr": "1",
                                                                "base": "0" * 64})
    assert r.status_code == 409 and path.read_text("utf-8") == before
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "owner", "index.hr": "1",
                                                                "base": file_digest(path) or ""})
    assert r.status_code == 200 and r.json() == {"name": "vera", "role": "owner", "indexes": ["hr"]}
    assert _users(path)["vera"] == ("owner", ("hr",))
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "otto", "role": "viewer", "index.docs": "1"})
    assert r.status_code == 200 and _users(path)["otto"] == ("viewer", ())
    assert "credential" in path.read_text("utf-8").split("[admin.users.otto]")[1]  # credential kept


async def test_removing_a_user_is_confirmed_first_in_the_browser(tmp_path: Path, private_index: Path,
                                                                 start_app: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    assert (await login(c)).status_code == 303
    page = await c.get("/admin/users")
    csrf = page.text.split('action="/admin/users/remove"')[1].split('name="csrf" value="')[1].split('"')[0]
    base = page.text.split('action="/admin/users/remove"')[1].split('name="base" value="')[1].split('"')[0]
    r = await c.post("/admin/users/remove", data={"csrf": csrf, "base": base, "name": "otto"})
    assert r.status_code == 200 and 'id="confirm-form"' in r.text and "otto" in _users(path)
    r = await c.post("/admin/users/remove", data={"csrf": "stale", "base": base, "name": "otto", "confirm": "1"})
    assert r.status_code == 403 and "otto" in _users(path)
    r = await c.post("/admin/users/remove", data={"csrf": csrf, "base": base, "name": "otto", "confirm": "1"})
    assert r.status_code == 303 and r.headers["location"] == "/admin/users?removed=otto#users"
    assert "otto" not in _users(path)
    assert 'id="user-removed"' in (await c.get(r.headers["location"])).text
    r = await c.post("/admin/users/remove", data={"csrf": csrf, "base": base, "name": "vera", "confirm": "1"})
    assert r.status_code == 409 and "vera" in _users(path)  # the page it came from is stale now
    assert gw.reloader.reload("file") == "reloaded"
    c.cookies.clear()
    assert (await c.get("/admin/gaps", headers={"authorization": f"Bearer otto:{OWNER}"})).status_code == 401
    r = await c.post("/admin/users/remove", headers=ADMIN, data={"name": "nobody"})
    assert r.status_code == 400 and "admin.users.nobody" in r.json()["error"]


async def test_an_admin_never_changes_or_removes_themselves(tmp_path: Path, private_index: Path, start_app: Any,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    r = await c.post("/admin/users/role", headers=ADMIN, data={"name": "vera", "role": "admin"})
    assert r.status_code == 200 and gw.reloader.reload("file") == "reloaded"
    vera = {"authorization": f"Bearer vera:{VIEWER}"}
    before = path.read_text("utf-8")
    for url, data in (("/admin/users/role", {"name": "vera", "role": "viewer"}),
                      ("/admin/users/remove", {"name": "vera"})):
        r = await c.post(url, headers=vera, data=data)
        assert r.status_code == 409 and "another admin" in r.json()["error"], r.text
    assert path.read_text("utf-8") == before
    r = await c.post("/admin/users/remove", headers=vera, data={"name": "otto"})  # another user: done
    assert r.status_code == 200 and "otto" not in _users(path)
