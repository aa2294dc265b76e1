"""An index is created only on purpose (gateway/console/index_create.py, `kbgate index create`):
an upload to a mistyped index is a 404 naming it and makes nothing; an admin creates an index
from the Indexes page (others are refused), and then uploads to it are written."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import orjson
import pytest

from gateway.console.credentials import hash_credential
from gateway.core.config import parse_config
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
from tests.support.files import deep_rst
from tests.support.harness import free_port

pytestmark = pytest.mark.anyio
ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}
OWNER = "owner-credential-0123456789abcdefghij"
PAGE = ("leave.md", "# 年假\n\n提前三天申请年假。\n".encode(), "text/markdown")


def _config(tmp_path: Path, indexes: Path, redis_url: str, audit: dict[str, Any] | None = None) -> Any:
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=indexes, redis_url=redis_url, key_prefix=f"kbgate-create-{free_port()}",
                  admin_token=ADMIN_TOKEN, audit=audit or {"sink": "off"})
    data["admin"]["users"] = {"olga": {"role": "owner", "indexes": ["docs"], "credential": hash_credential(OWNER)}}
    return parse_config(data, base_dir=tmp_path, env=ENV)


async def test_an_upload_to_a_mistyped_index_is_a_404_naming_it_and_creates_nothing(
        tmp_path: Path, private_index: Path, redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_config(tmp_path, private_index, redis_url))
    r = await c.post("/admin/indexes/dosc/upload", headers=ADMIN, files=[("file", PAGE)])
    assert r.status_code == 404 and "No index is named dosc" in r.text, r.text[-800:]
    assert not (private_index / "dosc").exists()
    for bad in (".deleted", "-x", "demo-docs%20"):  # names no index may have: the same 404, never a 500
        r = await c.post(f"/admin/indexes/{bad}/upload", headers=ADMIN, files=[("file", PAGE)])
        assert r.status_code == 404 and "No index is named" in r.text, (bad, r.text[-800:])


async def test_every_upload_is_audited_with_its_outcome_refusals_included(
        tmp_path: Path, private_index: Path, redis_url: str, start_app: Any) -> None:
    # An upload whose every file was refused (a too-deep .rst) left no audit line.
    log = tmp_path / "audit.jsonl"
    c, _, _ = await start_app(_config(tmp_path, private_index, redis_url, {"sink": "file", "path": str(log)}))
    secret = "机密的问题文本"  # a file's contents never reach the audit line
    deep = ("deep.rst", deep_rst(3000) + secret.encode(), "text/x-rst")
    for files in ([("file", deep)], [("file", deep), ("file", ("tool.exe", b"MZ\x00", "application/octet-stream"))],
                  [("file", deep), ("file", PAGE)]):
        r = await c.post("/admin/indexes/docs/upload", headers=ADMIN, files=files)
        assert r.status_code == 303, r.text[-800:]
    r = await c.post("/admin/indexes/docs/upload", headers=ADMIN, content=b"x")  # not the form
    assert r.status_code == 400
    text = log.read_text()
    assert secret not in text
    lines = [orjson.loads(line) for line in text.splitlines()]
    uploads = [(a["status"], a["outcome"], a.get("refused"), a.get("added")) for a in lines
               if a["tool"] == "admin.documents.upload"]
    assert uploads == [(422, "failed", 1, None), (422, "failed", 2, None), (200, "passed", 1, 1),
                       (400, "failed", None, None)], uploads


async def test_an_admin_creates_an_index_and_then_uploads_to_it(tmp_path: Path, private_index: Path,
                                                                 redis_url: str, start_app: Any) -> None:
    c, _, _ = await start_app(_config(tmp_path, private_index, redis_url))
    page = await c.get("/admin/indexes", headers=ADMIN)
    assert 'action="/admin/indexes/create"' in page.text
    owner = {"authorization": f"Bearer olga:{OWNER}"}
    assert 'action="/admin/indexes/create"' not in (await c.get("/admin/indexes", headers=owner)).text
    r = await c.post("/admin/indexes/create", headers=owner, data={"name": "hr"})
    assert r.status_code == 403 and not (private_index / "hr").exists()
    for bad in ("../x", "", "a b"):
        r = await c.post("/admin/indexes/create", headers=ADMIN, data={"name": bad})
        assert r.status_code == 400 and "must match" in r.text, (bad, r.text[-500:])
    r = await c.post("/admin/indexes/create", headers=ADMIN, data={"name": "hr"})
    assert r.status_code == 303 and r.headers["location"] == "/admin/indexes/hr"
    assert (private_index / "hr" / "meta.json").is_file()
    r = await c.post("/admin/indexes/create", headers=ADMIN, data={"name": "hr"})
    assert r.status_code == 409 and "exists already" in r.text
    assert (await c.get("/admin/indexes/hr", headers=ADMIN)).status_code == 200
    r = await c.post("/admin/indexes/hr/upload", headers=ADMIN, files=[("file", PAGE)])
    assert r.status_code == 303, r.text[-800:]
    docs = (await c.get("/admin/indexes/hr.json", headers=ADMIN)).json()["documents"]
    assert [d["doc_id"] for d in docs] == ["leave.md"]


def test_kbgate_index_create_makes_an_empty_index_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gateway.ops.index_commands import cmd_index_create

    cfg = write(tmp_path / "gateway.toml", {"indexes": {"dir": "indexes", "fresh": {"dense": "none"}}})
    args = argparse.Namespace(config=str(cfg), index="fresh")
    assert cmd_index_create(args) == 0 and (tmp_path / "indexes" / "fresh" / "meta.json").is_file()
    assert cmd_index_create(args) == 1 and "exists already" in capsys.readouterr().err
    assert cmd_index_create(argparse.Namespace(config=str(cfg), index="a/b")) == 2
    assert "must match" in capsys.readouterr().err
