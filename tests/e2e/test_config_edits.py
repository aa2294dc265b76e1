"""Console edits of the config on a real `kbgate serve` with two workers: admins (tools with
`Authorization: Bearer`, no base) adding users, adding tenant keys and retiring keys at once,
and a `kbgate users add` between them: every one answered as done is in the file, the others
were refused with a reason, none is lost. A form drawn before another change is refused 409
(HTML) and changes nothing."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import httpx

from gateway.core.config import load_config
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import free_port, kbgate, serve
from tests.support.threads import at_once

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}", "connection": "close"}  # a new connection: either worker
AT_ONCE = 6


def _at_once(base: str, posts: list[tuple[str, dict[str, str]]]) -> list[httpx.Response]:
    """POST each (path, form) from its own thread, released together."""
    return at_once([lambda p=p, f=f: httpx.post(base + p, data=f, headers=ADMIN, timeout=60) for p, f in posts])


def _on_disk(cfg: Path) -> Any:
    return load_config(cfg, read_secrets=False)


def test_edits_at_once_through_two_workers_are_each_kept_or_refused(tmp_path: Path, docs_index: Path,
                                                                   redis_url: str, key_prefix: str) -> None:
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS)], indexes=docs_index, port=port, workers=2,
                  redis_url=redis_url, key_prefix=key_prefix, admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    cfg = write(tmp_path / "gateway.toml", data)
    with serve(cfg, port=port, workers=2, env=ENV) as srv:
        # users: six admins and one `kbgate users add` at once
        cli: dict[str, Any] = {}
        t = threading.Thread(target=lambda: cli.update(r=kbgate("users", "add", "cli-user", "--role", "viewer",
                                                                 "--config", str(cfg))))
        t.start()
        got = _at_once(srv.base, [("/admin/users", {"name": f"user{i}", "role": "viewer"}) for i in range(AT_ONCE)])
        t.join()
        assert [r.status_code for r in got] == [200] * AT_ONCE and cli["r"].returncode == 0, cli["r"].stderr
        users = {u.name for u in _on_disk(cfg).admin.users}
        assert {f"user{i}" for i in range(AT_ONCE)} | {"cli-user"} <= users

        # tenant keys: each one shown is in the file, its secret beside it
        got = _at_once(srv.base, [("/admin/tenants/acme/keys", {"key_id": f"key{i}"}) for i in range(AT_ONCE)])
        assert [r.status_code for r in got] == [200] * AT_ONCE
        keys = {k.id: k for k in load_config(cfg, ENV).tenants["acme"].secrets}
        for r in got:
            assert keys[r.json()["key_id"]].value.reveal() == r.json()["secret"]

        # retirements: two at once both take effect; then every key at once leaves exactly one live
        got = _at_once(srv.base, [(f"/admin/tenants/acme/keys/{kid}/retire", {"when": "now"}) for kid, _ in ACME_KEYS])
        assert [r.status_code for r in got] == [200, 200]
        now_live = [k.id for k in _on_disk(cfg).tenants["acme"].secrets if k.not_after is None]
        assert sorted(now_live) == sorted(f"key{i}" for i in range(AT_ONCE))
        got = _at_once(srv.base, [(f"/admin/tenants/acme/keys/{kid}/retire", {"when": "now"}) for kid in now_live])
        retired = {kid for kid, r in zip(now_live, got, strict=True) if r.status_code == 200}
        refused = [r for r in got if r.status_code != 200]
        assert len(refused) == 1 and refused[0].status_code == 409 and "only live key" in refused[0].json()["error"]
        still = [k.id for k in _on_disk(cfg).tenants["acme"].secrets if k.not_after is None]
        assert len(still) == 1 and still[0] not in retired and set(now_live) == retired | set(still)


def test_a_form_drawn_before_another_change_is_refused(tmp_path: Path, docs_index: Path, redis_url: str,
                                                       key_prefix: str) -> None:
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS)], indexes=docs_index, port=port, workers=2,
                  redis_url=redis_url, key_prefix=key_prefix, admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    cfg = write(tmp_path / "gateway.toml", data)
    with serve(cfg, port=port, workers=2, env=ENV) as srv, \
            httpx.Client(base_url=srv.base, timeout=30, headers=ENGLISH) as c:
        assert c.get("/admin/login").status_code == 200  # the login form, with its CSRF cookie
        csrf = c.cookies.get("kbgate_login") or ""
        assert c.post("/admin/login", data={"user": "", "token": ADMIN_TOKEN, "csrf": csrf}).status_code == 303
        users_page, tenant_page = c.get("/admin/users").text, c.get("/admin/tenants/acme").text

        def form(page: str, action: str) -> dict[str, str]:
            block = page[page.index(f'action="{action}"'):]
            block = block[:block.index("</form>")]
            return dict(re.findall(r'<input type="hidden" name="([a-z]+)" value="([^"]*)"', block))

        add_user = form(users_page, "/admin/users")
        add_key = form(tenant_page, "/admin/tenants/acme/keys")
        retire = form(tenant_page, "/admin/tenants/acme/keys/acme-2026-10/retire")
        assert re.fullmatch("[0-9a-f]{64}", add_user["base"]) and add_user["base"] == add_key["base"]
        assert kbgate("users", "add", "meanwhile", "--role", "viewer", "--config", str(cfg)).returncode == 0
        before = cfg.read_bytes()
        for path, fields in (("/admin/users", {**add_user, "name": "late", "role": "viewer"}),
                             ("/admin/tenants/acme/keys", {**add_key, "key_id": "late"}),
                             ("/admin/tenants/acme/keys/acme-2026-10/retire", {**retire, "when": "now",
                                                                                "confirm": "1"})):
            r = c.post(path, data=fields)
            assert r.status_code == 409, (path, r.status_code)
            assert "changed since this page was opened" in r.text and "nothing was changed" in r.text
        assert cfg.read_bytes() == before and not (tmp_path / "secrets" / "acme-late").exists()
        fresh = form(c.get("/admin/users").text, "/admin/users")  # opened again: it lands
        assert c.post("/admin/users", data={**fresh, "name": "late", "role": "viewer"}).status_code == 303
        assert "late" in {u.name for u in _on_disk(cfg).admin.users}
