"""A config file the server refused shows on every console page, naming its key and reason,
until the file loads again (gateway/console/config_state.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.admin_app import ADMIN, AS_OWNER, admin_app

pytestmark = pytest.mark.anyio


async def test_a_refused_reload_shows_on_every_page_until_fixed(tmp_path: Path, private_index: Path,
                                                                 start_app: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, path = await admin_app(tmp_path, private_index, start_app, monkeypatch)
    good = path.read_text("utf-8")
    assert 'id="config-rejected"' not in (await c.get("/admin/", headers=ADMIN)).text
    path.write_text(good + '\n[indexes.docs]\nsynonyms = "synonyms/docs.txt"\n', "utf-8")  # no such file
    assert gw.reloader.reload("file") == "rejected"
    for url, who in (("/admin/", ADMIN), ("/admin/tenants", ADMIN), ("/admin/synonyms", AS_OWNER),
                     ("/admin/indexes", AS_OWNER), ("/admin/users", AS_OWNER)):
        r = await c.get(url, headers=who)
        assert 'id="config-rejected"' in r.text and "indexes.docs.synonyms" in r.text, (url, r.text[-2000:])
        assert "gateway.toml" in r.text and "No such file or directory" in r.text
    path.write_text(good, "utf-8")
    assert gw.reloader.reload("file") == "reloaded"
    assert 'id="config-rejected"' not in (await c.get("/admin/", headers=ADMIN)).text
