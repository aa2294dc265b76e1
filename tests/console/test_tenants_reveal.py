"""A key the console never showed (its value in a file kbgate did not write: the demo's
data/demo/secret) is shown once from the tenant page, as the page says, then never again
(gateway/console/tenants_reveal.py); a key the console generated is not offered again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from tests.support.admin_app import ADMIN
from tests.support.configs import ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.console import login

pytestmark = pytest.mark.anyio
DEMO_SECRET = "demo-secret-made-by-make-run-0123456789abcdef"


def _csrf(html: str, form_id: str) -> str:
    return html.split(f'id="{form_id}"')[1].split('name="csrf" value="')[1].split('"')[0]


async def test_the_demo_key_is_shown_once(tmp_path: Path, docs_index: Path, start_app: Any,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    (tmp_path / "secret").write_text(DEMO_SECRET + "\n", "utf-8")
    (tmp_path / "secret").chmod(0o600)
    data = config(tmp_path, tenants=[tenant("demo", keys=[("demo-1", "file:secret")],
                                            routes=[("tech", "software", "docs")])],
                  indexes=docs_index, admin_token=ADMIN_TOKEN, audit={"sink": "off"})
    path = write(tmp_path / "gateway.toml", data)
    c, _, _ = await start_app(load_config(path), clock=SYSTEM_CLOCK)
    assert (await login(c)).status_code == 303
    page = await c.get("/admin/tenants/demo")
    assert 'id="key-reveal"' in page.text and DEMO_SECRET not in page.text
    csrf = _csrf(page.text, "key-reveal")
    r = await c.post("/admin/tenants/demo/keys/demo-1/reveal", data={"csrf": "stale"})
    assert r.status_code == 403 and not (tmp_path / "secret.shown").exists()
    r = await c.post("/admin/tenants/demo/keys/demo-1/reveal", data={"csrf": csrf})
    assert r.status_code == 303 and r.headers["location"].startswith("/admin/tenants/demo?shown=")
    shown = await c.get(r.headers["location"])
    assert f'class="secret-value">{DEMO_SECRET}<' in shown.text
    assert DEMO_SECRET not in (await c.get(r.headers["location"])).text  # once
    assert 'id="key-reveal"' not in (await c.get("/admin/tenants/demo")).text
    r = await c.post("/admin/tenants/demo/keys/demo-1/reveal", data={"csrf": csrf})
    assert r.status_code == 409 and DEMO_SECRET not in r.text
    r = await c.post("/admin/tenants/demo/keys/demo-1/reveal", headers=ADMIN)
    assert r.status_code == 409 and DEMO_SECRET not in r.text

    # a key the console generates was shown when made: never offered again
    r = await c.post("/admin/tenants/demo/keys", headers=ADMIN, data={})
    assert r.status_code == 200, r.text
    new_id = r.json()["key_id"]
    page = await c.get("/admin/tenants/demo")
    assert f'class="key-to-paste">{new_id}<' in page.text and 'id="key-reveal"' not in page.text
