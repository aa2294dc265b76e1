"""The console of a `kbgate serve` whose config folder is mounted read-only (a `:ro` volume:
tests/support/readonly_mount.py), holding its feedback store (access.sqlite_path's default,
data/) and its indexes folder: filing a gap as a task and creating an index are refused with a
503 naming the folder that cannot be written, never a 500, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from tests.support.callbacks import post as callback
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.console import ENGLISH
from tests.support.harness import Server, free_port, kbgate_argv
from tests.support.polling import until
from tests.support.readonly_mount import read_only_argv

ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
MISS = "火星基地的氧气配额是多少"  # nothing in the test index answers it (tests.support.documents)


def test_filing_a_gap_and_creating_an_index_on_a_read_only_folder_are_refused_naming_it(
        tmp_path: Path, private_index: Path, redis_url: str) -> None:
    # Both answered 500: sqlite3.OperationalError (unable to open database file) and OSError
    # (Read-only file system) from the dense folder's mkdir.
    port = free_port()
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=private_index, port=port, redis_url=redis_url, key_prefix=f"kbgate-rocons-{port}",
                  admin_token=ADMIN_TOKEN, audit={"sink": "off"}, gaps={"flush_seconds": 0.1, "threshold": 0.0})
    cfg = write(tmp_path / "gateway.toml", data)
    (tmp_path / "data").mkdir()  # the feedback store's folder is there, as shipped, but read-only
    argv = read_only_argv(tmp_path, kbgate_argv(cfg, bind=f"127.0.0.1:{port}", workers=1))
    with Server(argv, port, env=ENV, workers=1) as srv, \
            httpx.Client(base_url=srv.base, timeout=30, headers=ENGLISH) as c:
        assert callback(c, srv.base, ENV["ACME_SECRET"], query=MISS).json()["Result"] == []

        def groups() -> list[dict[str, Any]]:
            got: list[dict[str, Any]] = c.get("/admin/gaps.json", headers=ADMIN).json()["groups"]
            return got

        [group] = until(groups, within=30, what="the miss reaches the gaps view")
        r = c.post("/admin/gaps/file", headers=ADMIN, json={"group": group["id"]})
        assert r.status_code == 503, r.text
        error = r.json()["error"]
        assert str(tmp_path / "data") in error and "cannot be opened or written" in error, error
        r = c.post("/admin/indexes/create", headers=ADMIN, data={"name": "hr"})
        assert r.status_code == 503, r.text[-800:]
        assert str(private_index) in r.text and "read-only" in r.text and "Nothing was created" in r.text
        assert c.get("/readyz").status_code == 200  # the server goes on
    assert not (tmp_path / "data" / "feedback.sqlite3").exists() and not (private_index / "hr").exists()
