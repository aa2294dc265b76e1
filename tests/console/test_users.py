"""Console users and roles: credentials (scrypt hash only), `can`, the [admin.users] config,
`kbgate users`, and through the app: login by user and credential, a refusal (403, never a 500,
nothing changed) for a role without the right, an owner seeing only their indexes' gaps, and
every change audited with who made it. The admin token keeps working (tests/console/test_admin.py).
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.credentials import hash_credential, new_credential, verify
from gateway.console.users import ConsoleUser, can
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config, parse_config
from gateway.core.errors import ConfigError
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, EVERYTHING, TOKEN_ALICE, client, config, tenant, write
from tests.support.console import login
from tests.support.harness import kbgate

pytestmark = pytest.mark.anyio

VIEWER, OWNER = new_credential(), new_credential()
HASHES: dict[str, str] = {}


def _hash(credential: str) -> str:
    if credential not in HASHES:
        HASHES[credential] = hash_credential(credential)
    return HASHES[credential]


def test_a_credential_is_kept_only_as_its_scrypt_hash() -> None:
    stored = _hash(VIEWER)
    assert stored.startswith("scrypt$16384$8$5$") and VIEWER not in stored
    assert verify(VIEWER, stored) and not verify(VIEWER + "x", stored) and not verify(OWNER, stored)
    assert not verify(None, stored) and not verify("", stored) and not verify("x" * 300, stored)
    assert not verify(VIEWER, "scrypt$1$1$1$AAAA$BBBB") and not verify(VIEWER, "md5$x")  # malformed: False, no raise
    assert hash_credential(VIEWER) != stored  # a fresh salt each time


def test_can_is_the_one_rule() -> None:
    viewer, owner, admin = (ConsoleUser("v", "viewer"), ConsoleUser("o", "owner", frozenset({"docs"})),
                            ConsoleUser("admin", "admin"))
    assert all(can(u, "view") for u in (viewer, owner, admin)) and not can(None, "view")
    assert can(owner, "edit_documents", "docs") and not can(owner, "edit_documents", "kb")
    assert not can(owner, "edit_documents") and not can(viewer, "edit_synonyms", "docs")
    assert can(owner, "view_gaps", "docs") and not can(owner, "view_gaps", "kb") and can(viewer, "view_gaps", "kb")
    assert can(admin, "manage_users") and not can(owner, "manage_users") and not can(viewer, "manage_tenants")
    with pytest.raises(ValueError):
        can(admin, "edit_documnets", "docs")  # a typo grants nothing


@pytest.mark.parametrize(("user", "key"), [
    ({"role": "boss", "credential": "x"}, "admin.users.ann.role"),
    ({"role": "owner", "credential": "x"}, "admin.users.ann.indexes"),
    ({"role": "viewer", "indexes": ["docs"], "credential": "x"}, "admin.users.ann.indexes"),
    ({"role": "viewer", "credential": "a-pasted-credential-value"}, "admin.users.ann.credential"),
    ({"role": "viewer", "credential": "x", "password": "y"}, "admin.users.ann.password"),
])
def test_a_bad_user_entry_is_refused_naming_the_key_never_echoing_it(tmp_path: Path, user: dict[str, Any],
                                                                      key: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"admin": {"users": {"ann": user}}}, base_dir=tmp_path, env={})
    assert exc.value.key == key and "a-pasted-credential-value" not in str(exc.value)
    with pytest.raises(ConfigError, match="admin.users.admin"):
        parse_config({"admin": {"users": {"admin": {"role": "admin", "credential": _hash(VIEWER)}}}},
                     base_dir=tmp_path, env={})


def test_kbgate_users_add_list_remove(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('[indexes]\ndir = "indexes"\n\n[audit]\nsink = "stdout"\n', "utf-8")
    before = path.read_text("utf-8")
    for missing in ("docs", "../docs"):  # an owner of an index that does not exist: refused, nothing written
        refused = kbgate("users", "add", "ann", "--role", "owner", "--index", missing, "--config", str(path))
        assert refused.returncode == 2 and "admin.users.ann.indexes" in refused.stderr, refused.stderr
        assert "which no index is" in refused.stderr and path.read_text("utf-8") == before
    assert kbgate("index", "create", "--config", str(path), "--index", "docs").returncode == 0
    path.chmod(0o644)
    added = kbgate("users", "add", "ann", "--role", "owner", "--index", "docs", "--config", str(path))
    assert added.returncode == 0, added.stderr
    assert path.stat().st_mode & 0o777 == 0o600  # it holds a credential hash now: its owner's only
    credential = added.stdout.split("shown once, give it to ann through your secret store): ")[1].split()[0]
    text = path.read_text("utf-8")
    assert credential not in text and "[admin.users.ann]" in text
    entry = load_config(path).admin.users[0]
    assert (entry.name, entry.role, entry.indexes) == ("ann", "owner", ("docs",)) and verify(credential,
                                                                                             entry.credential)
    audit = [orjson.loads(line) for line in added.stdout.splitlines() if line.startswith("{")]
    assert [(a["tool"], a["route"], a["principal"]["id"][:4]) for a in audit] == [("admin.users.add", "ann", "cli:")]
    again = kbgate("users", "add", "ann", "--role", "viewer", "--config", str(path))
    assert again.returncode == 2 and "admin.users.ann" in again.stderr and path.read_text("utf-8") == text
    typed = kbgate("users", "add", "bob", "--role", "viewer", "--credential-stdin", "--config", str(path),
                   input="bob-typed-this-one\n")
    assert typed.returncode == 0 and "bob-typed-this-one" not in typed.stdout + path.read_text("utf-8")
    listed = kbgate("users", "list", "--json", "--config", str(path))
    assert orjson.loads(listed.stdout)["users"] == [{"name": "ann", "role": "owner", "indexes": ["docs"]},
                                                    {"name": "bob", "role": "viewer", "indexes": []}]
    gone = kbgate("users", "remove", "ann", "--config", str(path))
    assert gone.returncode == 0 and "[admin.users.ann]" not in path.read_text("utf-8")
    assert kbgate("users", "remove", "ann", "--config", str(path)).returncode == 2


def users_config(root: Path, docs_index: Path, **more: Any) -> dict[str, Any]:
    """acme → docs, agent routes support → docs and other → kb, the admin token and two users:
    vera (viewer) and otto (owner of docs)."""
    agent = {"ref_key_env": "KBGATE_REF_KEY", "routes": {"support": {"index": "docs"}, "other": {"index": "kb"}},
             "clients": {"alice": client("t1", TOKEN_ALICE, ["support", "other"], ["dify.retrieval"], **EVERYTHING)}}
    data = config(root, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")])],
                  indexes=docs_index, admin_token=ADMIN_TOKEN, agent=agent, gaps={"threshold": 0.0}, **more)
    data["admin"]["users"] = {"vera": {"role": "viewer", "credential": _hash(VIEWER)},
                              "otto": {"role": "owner", "indexes": ["docs"], "credential": _hash(OWNER)}}
    return data


async def _app(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch,
               **more: Any) -> tuple[httpx.AsyncClient, Any]:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    path = write(tmp_path / "gateway.toml", users_config(tmp_path, docs_index, **more))
    c, gw, _ = await start_app(load_config(path), clock=SYSTEM_CLOCK)
    return c, gw


async def _miss(c: httpx.AsyncClient, route: str, query: str) -> None:
    r = await c.post("/dify/retrieval", headers={"authorization": f"Bearer {TOKEN_ALICE}"},
                     json={"knowledge_id": route, "query": query,
                           "retrieval_setting": {"top_k": 3, "score_threshold": 0}})
    assert r.status_code == 200 and r.json()["records"] == []


async def test_roles_through_the_app(tmp_path: Path, docs_index: Path, start_app: Any,
                                     monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    c, gw = await _app(tmp_path, docs_index, start_app, monkeypatch, audit={"sink": "stdout"},
                       access={"sqlite_path": str(tmp_path / "feedback.sqlite3")})
    await _miss(c, "support", "火星基地的氧气配额是多少")  # a gap of docs
    await _miss(c, "other", "木星探测器的燃料配额是多少")  # a gap of kb
    await gw.gaps.flush()
    viewer = {"authorization": f"Bearer vera:{VIEWER}"}
    owner = {"authorization": f"Bearer otto:{OWNER}"}

    # Login by user and credential through the form; a wrong one is refused, no cookie.
    bad = await login(c, "otto", VIEWER)
    assert bad.status_code == 401 and "kbgate_admin=" not in bad.headers.get("set-cookie", "") \
        and "do not match" in bad.text
    ok = await login(c, "otto", OWNER)
    assert ok.status_code == 303 and ok.headers["location"] == "/admin/"
    page = await c.get("/admin/gaps")
    assert page.status_code == 200 and "otto (owner of docs)" in page.text
    c.cookies.clear()

    # An owner sees only their indexes' gaps; a viewer and the admin see all.
    everything = (await c.get("/admin/gaps.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})).json()
    assert sorted(g["index"] for g in everything["groups"]) == ["docs", "kb"]
    assert sorted(g["index"] for g in (await c.get("/admin/gaps.json", headers=viewer)).json()["groups"]) == \
        ["docs", "kb"]
    own = (await c.get("/admin/gaps.json", headers=owner)).json()["groups"]
    assert [g["index"] for g in own] == ["docs"]
    kb_group = next(g["id"] for g in everything["groups"] if g["index"] == "kb")

    # Refusals: 403 with a clear message, never a 500, nothing filed.
    r = await c.get("/admin/users.json", headers=viewer)
    assert r.status_code == 403 and "viewer" in r.json()["error"]
    r = await c.get("/admin/users", headers=owner)
    assert r.status_code == 403 and "Not allowed" in r.text and 'aria-label="Console"' in r.text
    r = await c.post("/admin/gaps/file", headers=viewer, json={"group": own[0]["id"]})
    assert r.status_code == 403 and "viewer" in r.json()["error"]
    r = await c.post("/admin/gaps/file", headers=owner, json={"group": kb_group})
    assert r.status_code == 404  # not one of the owner's gaps: as if absent
    assert not (tmp_path / "feedback.sqlite3").exists() or sqlite3.connect(tmp_path / "feedback.sqlite3").execute(
        "SELECT count(*) FROM records").fetchone() == (0,)

    # The owner files their own gap; the audit line names who did it.
    capsys.readouterr()
    r = await c.post("/admin/gaps/file", headers=owner, json={"group": own[0]["id"]})
    assert r.status_code == 200 and r.json()["group"] == own[0]["id"]
    lines = [orjson.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    filed = [x for x in lines if x["tool"] == "admin.file_gap"]
    assert [(x["principal"]["id"], x["route"], x["status"]) for x in filed] == [("otto", "docs", 200)]
    refused = await c.post("/admin/gaps/file", headers=viewer, json={"group": own[0]["id"]})
    assert refused.status_code == 403
    lines = [orjson.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert [(x["principal"]["id"], x["outcome"]) for x in lines if x["tool"] == "admin.file_gap"] == \
        [("vera", "denied")]

    # Users page for the admin: names and roles, never a hash.
    users = (await c.get("/admin/users.json", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})).json()
    assert re.fullmatch("[0-9a-f]{64}", users.pop("base"))  # the file's SHA-256, for a tool's change
    assert users == {"users": [{"name": "vera", "role": "viewer", "indexes": []},
                               {"name": "otto", "role": "owner", "indexes": ["docs"]}], "admin_token": True}
    html = (await c.get("/admin/users", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})).text
    assert "scrypt$" not in html and 'data-user="otto"' in html


def test_kbgate_users_add_on_a_missing_config_says_no_such_file(tmp_path: Path) -> None:
    # It said "cannot be read as UTF-8" (check-config says "No such file").
    r = kbgate("users", "add", "x", "--role", "viewer", "--config", str(tmp_path / "nonexist.toml"))
    assert r.returncode == 2 and "No such file or directory" in r.stderr and "UTF-8" not in r.stderr, r.stderr


async def test_the_users_form_makes_owners_only_of_indexes_that_exist(tmp_path: Path, docs_index: Path,
                                                                      start_app: Any,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # index.nope=1 made an owner of an index nobody has.
    c, _ = await _app(tmp_path, docs_index, start_app, monkeypatch)
    admin = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    before = (tmp_path / "gateway.toml").read_text("utf-8")
    html = (await c.get("/admin/users", headers=admin)).text
    assert 'name="index.docs"' in html and 'name="index.kb"' in html and 'name="index.nope"' not in html
    for index in ("nope", "../docs"):
        r = await c.post("/admin/users", headers=admin, data={"name": "nina", "role": "owner", f"index.{index}": "1"})
        assert r.status_code == 400 and "which no index is" in r.json()["error"], r.text
    assert (tmp_path / "gateway.toml").read_text("utf-8") == before
    r = await c.post("/admin/users", headers=admin, data={"name": "nina", "role": "owner", "index.docs": "1"})
    assert r.status_code == 200 and r.json()["indexes"] == ["docs"], r.text


async def test_a_gap_mark_is_kept_only_for_the_markers_own_indexes(tmp_path: Path, docs_index: Path, start_app: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # One question asked of docs (otto's) and kb (kira's): otto's "resolved" resolved it for kira too.
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    kira = new_credential()
    data = users_config(tmp_path, docs_index)
    data["admin"]["users"]["kira"] = {"role": "owner", "indexes": ["kb"], "credential": _hash(kira)}
    c, gw, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    question = "火星基地的氧气配额是多少"
    await _miss(c, "support", question)
    await _miss(c, "other", question)
    await gw.gaps.flush()
    who = {"otto": {"authorization": f"Bearer otto:{OWNER}"}, "kira": {"authorization": f"Bearer kira:{kira}"},
           "admin": {"authorization": f"Bearer {ADMIN_TOKEN}"}}

    async def seen(name: str) -> tuple[str, str]:
        [g] = (await c.get("/admin/gaps.json", headers=who[name])).json()["groups"]
        return g["index"], g["status"]

    [group] = (await c.get("/admin/gaps.json", headers=who["admin"])).json()["groups"]
    r = await c.post("/admin/gaps/mark", headers=who["otto"], json={"group": group["id"], "mark": "resolved"})
    assert r.status_code == 200, r.text
    assert await seen("otto") == ("docs", "resolved") and await seen("kira") == ("kb", "open")
    assert r.json()["indexes"] == ["docs"]
    r = await c.post("/admin/gaps/mark", headers=who["kira"], json={"group": group["id"], "mark": "ignored"})
    assert r.status_code == 200 and r.json()["indexes"] == ["kb"]
    assert await seen("otto") == ("docs", "resolved") and await seen("kira") == ("kb", "ignored")
    r = await c.post("/admin/gaps/mark", headers=who["admin"], json={"group": group["id"], "mark": "open"})
    assert r.status_code == 200 and r.json()["indexes"] == ["docs", "kb"]  # an admin marks every index of it
    assert await seen("otto") == ("docs", "open") and await seen("kira") == ("kb", "open")
