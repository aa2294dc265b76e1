"""The Tenants page through the app: what to paste, each key's state and last use, the JSON
twin, rotation through gateway/ops/secrets.py (add shown once, retire, its refusals), refusals
by role, and a secret never in a URL, a log or the audit. Adding a user from the Users page.
The connectivity test over a real network stack: tests/console/test_tenants_browser.py."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.credentials import verify
from gateway.console.csrf import form_token
from gateway.console.once import MemoryOnce, seal, unseal
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from gateway.core.errors import ConfigError
from tests.support.admin_app import OWNER, VIEWER, admin_app
from tests.support.callbacks import body, signed
from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, SECRET_ACME, config, tenant, write
from tests.support.console import login

pytestmark = pytest.mark.anyio


ADMIN = {"authorization": f"Bearer {ADMIN_TOKEN}"}


async def _app(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch,
               **server: Any) -> tuple[httpx.AsyncClient, Any, Path]:
    return await admin_app(tmp_path, docs_index, start_app, monkeypatch, audit={"sink": "file", "path": "audit.jsonl"},
                           **({"server": server} if server else {}))


async def _login(c: httpx.AsyncClient, token: str = ADMIN_TOKEN, user: str = "") -> str:
    """Log `c` in; the session cookie it got (what its forms' csrf values are keyed by)."""
    r = await login(c, user, token)
    assert r.status_code == 303, r.text
    return r.cookies["kbgate_admin"]


def _csrf(form: str, session: str) -> dict[str, str]:
    return {"csrf": form_token(session, form)}


def test_a_note_is_sealed_under_the_login_that_made_it() -> None:
    blob = seal("login-a", "id1", {"credential": "c-123"})
    assert b"c-123" not in blob and unseal("login-a", "id1", blob) == {"credential": "c-123"}
    assert unseal("login-b", "id1", blob) is None and unseal("login-a", "id2", blob) is None
    assert unseal("login-a", "id1", blob[:-1] + bytes([blob[-1] ^ 1])) is None


async def test_a_memory_note_is_taken_once_and_only_by_its_login() -> None:
    once = MemoryOnce()
    note = await once.put("a", {"x": 1})
    assert await once.get("b", note) is None  # another login: nothing, and the note stays
    assert await once.get("a", note, take=False) == {"x": 1}
    assert await once.get("a", note) == {"x": 1} and await once.get("a", note) is None


async def test_the_tenant_page_shows_what_to_paste_and_each_key(tmp_path: Path, docs_index: Path, start_app: Any,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    c, gw, _ = await _app(tmp_path, docs_index, start_app, monkeypatch)
    raw = body()
    assert (await c.post("/volcengine/acme", content=raw, headers=signed(SECRET_ACME, raw))).status_code == 200
    await gw.volcengine.key_usage.flush()
    listing = await c.get("/admin/tenants", headers=ADMIN)
    assert listing.status_code == 200 and 'href="/admin/tenants/acme"' in listing.text
    assert "not yet" not in listing.text.lower()
    page = await c.get("/admin/tenants/acme", headers=ADMIN)
    assert page.status_code == 200
    assert '<code class="callback-url">http://kbgate/volcengine/acme</code>' in page.text
    assert "server.public_url is not set" in page.text and SECRET_ACME not in page.text
    twin = (await c.get("/admin/tenants.json?tenant=acme", headers=ADMIN)).json()["tenants"][0]
    assert twin["callback_url"] == "http://kbgate/volcengine/acme" and twin["url_from"] == "request"
    assert [(k["id"], k["state"], k["count"]) for k in twin["keys"]] == [("acme-2026-10", "live", 0),
                                                                        ("acme-2026-11", "live", 1)]
    assert twin["keys"][1]["last_used"] is not None and twin["newest"] == "acme-2026-11"
    assert twin["routes"] == [{"first": "tech", "second": "software", "index": "docs"}]
    assert (await c.get("/admin/tenants.json?tenant=nope", headers=ADMIN)).status_code == 404
    assert (await c.get("/admin/tenants/nope", headers=ADMIN)).status_code == 404


async def test_public_url_decides_the_callback_url(tmp_path: Path, docs_index: Path, start_app: Any,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await _app(tmp_path, docs_index, start_app, monkeypatch, public_url="https://kb.example.com/gw/")
    twin = (await c.get("/admin/tenants.json", headers=ADMIN)).json()["tenants"][0]
    assert twin["callback_url"] == "https://kb.example.com/gw/volcengine/acme"
    assert twin["url_from"] == "server.public_url"
    assert twin["test_url"] == twin["callback_url"]


@pytest.mark.parametrize("bad", ["kb.example.com", "ftp://kb.example.com", "https://kb.example.com/?a=1",
                                 "https://u:p@kb.example.com", "https://kb.example.com:99999", 7])
def test_a_bad_public_url_is_refused_naming_the_key(tmp_path: Path, bad: object) -> None:
    from gateway.core.config import parse_config

    with pytest.raises(ConfigError) as err:
        parse_config({"server": {"public_url": bad}}, base_dir=tmp_path, env={})
    assert err.value.key == "server.public_url"


@pytest.fixture(name="logged_in")
async def _logged_in(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch,
                     caplog: pytest.LogCaptureFixture) -> tuple[httpx.AsyncClient, Path, str]:
    """(the console's client logged in as the admin through the form, the config file, the
    session cookie), every log line captured from DEBUG on."""
    caplog.set_level(logging.DEBUG)
    c, _, path = await _app(tmp_path, docs_index, start_app, monkeypatch)
    return c, path, await _login(c)


async def test_rotation_from_the_browser_shows_a_secret_once_and_nowhere_else(
        tmp_path: Path, logged_in: tuple[httpx.AsyncClient, Path, str], caplog: pytest.LogCaptureFixture) -> None:
    c, path, session = logged_in
    before = path.read_text("utf-8")
    stale = await c.post("/admin/tenants/acme/keys", data={"key_id": "acme-new"})  # no csrf value
    assert stale.status_code == 403 and path.read_text("utf-8") == before

    added = await c.post("/admin/tenants/acme/keys",
                         data={"key_id": "acme-new", **_csrf("tenant-add-key:acme", session)})
    assert added.status_code == 303
    location = added.headers["location"]
    assert re.fullmatch(r"/admin/tenants/acme\?shown=[A-Za-z0-9_-]{22}#rotation", location), location
    secret = (tmp_path / "secrets" / "acme-acme-new").read_text("utf-8").strip()
    assert len(secret) >= 32 and secret not in path.read_text("utf-8")
    shown = await c.get(location.split("#")[0])
    assert shown.status_code == 200 and f'<code class="secret-value">{secret}</code>' in shown.text
    again = await c.get(location.split("#")[0])  # a refresh: never again
    assert again.status_code == 200 and secret not in again.text and "shown already" in again.text
    assert secret not in (await c.get("/admin/tenants.json", headers=ADMIN)).text
    audit = (tmp_path / "audit.jsonl").read_text("utf-8")
    assert secret not in audit and secret not in caplog.text
    lines = [orjson.loads(x) for x in audit.splitlines()]
    assert [(x["tool"], x["principal"]["id"], x["key_id"]) for x in lines
            if x["tool"] == "admin.tenants.add_key" and x["status"] == 200] == [("admin.tenants.add_key", "admin",
                                                                                  "acme-new")]

    # A pasted key (the one the Volcengine console shows) is stored, never shown back.
    pasted = "console-shown-key-0123456789abcdef"
    r = await c.post("/admin/tenants/acme/keys", data={"key_id": "acme-pasted", "value": pasted,
                                                        **_csrf("tenant-add-key:acme", session)})
    assert r.status_code == 303 and pasted not in r.headers["location"]
    assert pasted not in (await c.get(r.headers["location"].split("#")[0])).text
    short = await c.post("/admin/tenants/acme/keys", data={"value": "short", **_csrf("tenant-add-key:acme", session)})
    assert short.status_code == 400 and "the key field" in short.text and "Nothing was changed" in short.text

    # Retire the two old keys: one now, one with a grace period, each confirmed; the last live keys stay.
    before = path.read_text("utf-8")
    ask = await c.post("/admin/tenants/acme/keys/acme-2026-10/retire",
                       data={"when": "now", **_csrf("tenant-retire:acme:acme-2026-10", session)})
    assert ask.status_code == 200 and "Retire key acme-2026-10?" in ask.text and path.read_text("utf-8") == before
    assert 'name="confirm" value="1"' in ask.text and "Yes, retire key acme-2026-10 now" in ask.text
    r = await c.post("/admin/tenants/acme/keys/acme-2026-10/retire",
                     data={"when": "now", "confirm": "1", **_csrf("tenant-retire:acme:acme-2026-10", session)})
    assert r.status_code == 303 and r.headers["location"] == "/admin/tenants/acme#keys"
    r = await c.post("/admin/tenants/acme/keys/acme-2026-11/retire",
                     data={"when": "3600", "confirm": "1", **_csrf("tenant-retire:acme:acme-2026-11", session)})
    assert r.status_code == 303
    twin = (await c.get("/admin/tenants.json", headers=ADMIN)).json()["tenants"][0]
    states = {k["id"]: k["state"] for k in twin["keys"]}
    assert states == {"acme-2026-10": "retired", "acme-2026-11": "retiring", "acme-new": "live", "acme-pasted": "live"}
    page = (await c.get("/admin/tenants/acme")).text
    assert "retiring until" in page and "retired since" in page
    assert pasted not in caplog.text and pasted not in (tmp_path / "audit.jsonl").read_text("utf-8")


async def test_retiring_the_last_live_key_is_refused_and_changes_nothing(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await _app(tmp_path, docs_index, start_app, monkeypatch)
    r = await c.post("/admin/tenants/acme/keys/acme-2026-10/retire", headers=ADMIN, data={"when": "now"})
    assert r.status_code == 200 and r.json()["key_id"] == "acme-2026-10"  # the JSON twin of a tool
    before = path.read_text("utf-8")
    r = await c.post("/admin/tenants/acme/keys/acme-2026-11/retire", headers=ADMIN, data={"when": "now"})
    assert r.status_code == 409 and "no live key" in r.json()["error"] and path.read_text("utf-8") == before
    r = await c.post("/admin/tenants/acme/keys", headers=ADMIN, data={"key_id": "via-tool"})
    assert r.status_code == 200 and r.json()["key_id"] == "via-tool" and len(r.json()["secret"]) >= 32


@pytest.mark.parametrize(("login", "user", "role"), [(VIEWER, "vera", "viewer"), (OWNER, "otto", "owner of docs")],
                         ids=["viewer", "owner"])  # fixed ids: the credentials are random per process
async def test_only_admins_change_tenants(tmp_path: Path, docs_index: Path, start_app: Any,
                                          monkeypatch: pytest.MonkeyPatch, login: str, user: str, role: str) -> None:
    c, _, path = await _app(tmp_path, docs_index, start_app, monkeypatch)
    before = path.read_text("utf-8")
    session = await _login(c, login, user)
    page = await c.get("/admin/tenants/acme")
    assert page.status_code == 200 and f"Your role ({role}) reads this page" in page.text
    assert 'action="/admin/tenants/acme/keys"' not in page.text and "/test" not in page.text
    cookie = f"{user}:{login}"
    for url, form in (("/admin/tenants/acme/keys", "tenant-add-key:acme"),
                      ("/admin/tenants/acme/test", "tenant-test:acme"),
                      ("/admin/tenants/acme/keys/acme-2026-10/retire", "tenant-retire:acme:acme-2026-10")):
        r = await c.post(url, data={"when": "now", "route": "0", **_csrf(form, session)})
        assert r.status_code == 403 and f"Your role ({role}) does not allow changing or testing tenants" in r.text
        assert "Nothing was changed" in r.text
    bearer = {"authorization": f"Bearer {cookie}"}
    c.cookies.clear()
    r = await c.post("/admin/tenants/acme/keys", headers=bearer, data={})
    assert r.status_code == 403 and role in r.json()["error"]
    r = await c.post("/admin/users", headers=bearer, data={"name": "eve", "role": "admin"})
    assert r.status_code == 403 and role in r.json()["error"]
    assert path.read_text("utf-8") == before and not (tmp_path / "secrets").exists()
    audit = [orjson.loads(x) for x in (tmp_path / "audit.jsonl").read_text("utf-8").splitlines()]
    assert {(x["tool"], x["principal"]["id"], x["outcome"]) for x in audit} == {
        ("admin.tenants.add_key", user, "denied"), ("admin.tenants.test", user, "denied"),
        ("admin.tenants.retire_key", user, "denied"), ("admin.users.add", user, "denied")}


async def test_an_admin_adds_a_user_from_the_browser_credential_shown_once(
        tmp_path: Path, logged_in: tuple[httpx.AsyncClient, Path, str], caplog: pytest.LogCaptureFixture) -> None:
    c, path, session = logged_in
    form = (await c.get("/admin/users")).text
    assert 'name="index.docs"' in form and '<option value="owner">owner</option>' in form
    r = await c.post("/admin/users", data={"name": "ann", "role": "owner", "index.docs": "1",
                                           **_csrf("users-add", session)})
    assert r.status_code == 303 and re.fullmatch(r"/admin/users\?added=[A-Za-z0-9_-]{22}", r.headers["location"])
    shown = (await c.get(r.headers["location"])).text
    credential = re.search(r'<code class="credential">([^<]+)</code>', shown)
    assert credential is not None
    entry = next(u for u in load_config(path).admin.users if u.name == "ann")
    assert (entry.role, entry.indexes) == ("owner", ("docs",)) and verify(credential.group(1), entry.credential)
    assert credential.group(1) not in path.read_text("utf-8") and credential.group(1) not in caplog.text
    assert credential.group(1) not in (tmp_path / "audit.jsonl").read_text("utf-8")
    again = (await c.get(r.headers["location"])).text
    assert credential.group(1) not in again and 'data-user="ann"' in again  # shown once; listed at once
    dup = await c.post("/admin/users", data={"name": "ann", "role": "viewer", **_csrf("users-add", session)})
    assert dup.status_code == 400 and "admin.users.ann" in dup.text and "Nothing was changed" in dup.text
    tool = await c.post("/admin/users", headers=ADMIN, data={"name": "bo", "role": "viewer", "index.docs": "1"})
    assert tool.status_code == 200 and tool.json()["indexes"] == [] and tool.json()["role"] == "viewer"


async def test_a_redis_note_is_taken_once_by_its_login(redis_url: str, key_prefix: str) -> None:
    from gateway.console.once import RedisOnce

    once = RedisOnce(redis_url, key_prefix, 1.0)
    try:
        note = await once.put("a", {"credential": "c-456"})
        assert await once.get("b", note) is None and await once.get("a", note, take=False) == {"credential": "c-456"}
        assert await once.get("a", note) == {"credential": "c-456"} and await once.get("a", note) is None
    finally:
        await once.close()


async def test_a_test_that_reaches_nothing_or_names_no_route_is_a_clear_answer(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, _ = await _app(tmp_path, docs_index, start_app, monkeypatch)
    bad = await c.post("/admin/tenants/acme/test", headers=ADMIN, data={"route": "7"})
    assert bad.status_code == 400 and "route" in bad.json()["error"]
    long = await c.post("/admin/tenants/acme/test", headers=ADMIN, data={"query": "q" * 600})
    assert long.status_code == 400 and "max_query_chars" in long.json()["error"]
    # In-process there is no listening socket: the answer says so (no 500, no hang).
    r = await c.post("/admin/tenants/acme/test", headers=ADMIN, data={"route": "0", "key": "acme-2026-10"})
    assert r.status_code == 200
    got = r.json()
    assert got["status"] is None and got["problem"] and got["key_id"] == "acme-2026-10" and not got["ok"]
    assert (await c.post("/admin/tenants/nope/test", headers=ADMIN, data={})).status_code == 404


async def test_a_tenant_with_no_key_that_verifies_is_a_readiness_note_and_a_red_line(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as dt

    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    past = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    gone = tenant("gone", keys=ACME_KEYS, routes=[("tech", "software", "docs")], path="/volcengine/gone")
    for s in gone["gone"]["secrets"]:
        s["not_after"] = past  # both keys retired: the outage a silent rotation ends in
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS, routes=[("tech", "software", "docs")]), gone],
                  indexes=docs_index, admin_token=ADMIN_TOKEN)
    c, _, _ = await start_app(load_config(write(tmp_path / "gateway.toml", data)), clock=SYSTEM_CLOCK)
    ready = await c.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready"  # acme still serves
    notes = [n for n in ready.json()["notes"] if n.startswith("tenant ")]
    assert notes == ["tenant gone has no key that verifies: every callback is refused (Ret 40105); add one: "
                     "kbgate secrets add --tenant gone (or the console's Tenants page)"]
    page = (await c.get("/admin/", headers=ADMIN)).text
    line = re.search(r'<p class="error keyless" role="alert" data-tenant="gone">(.*?)</p>', page)
    assert line is not None and "tenant gone has no key that verifies" in line.group(1)
    assert 'href="/admin/tenants/gone#rotation">Add a key to tenant gone</a>' in line.group(1)
    assert 'data-tenant="acme"' not in page
    twin = (await c.get("/admin/overview.json", headers=ADMIN)).json()
    assert [k["tenant"] for k in twin["keyless"]] == ["gone"]


async def test_the_retire_question_says_at_once_when_it_would_be_refused(
        tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    c, _, path = await _app(tmp_path, docs_index, start_app, monkeypatch)
    session = await _login(c)
    page = (await c.get("/admin/tenants/acme")).text
    assert '<select name="when" required><option value="" selected>choose…</option>' in page  # never "now"
    unchosen = await c.post("/admin/tenants/acme/keys/acme-2026-10/retire",
                            data=_csrf("tenant-retire:acme:acme-2026-10", session))
    assert unchosen.status_code == 400 and "Choose when to retire the key" in unchosen.text
    r = await c.post("/admin/tenants/acme/keys/acme-2026-10/retire",
                     data={"when": "3600", "confirm": "1", **_csrf("tenant-retire:acme:acme-2026-10", session)})
    assert r.status_code == 303  # the old key in 1 hour: the new one stays
    before = path.read_text("utf-8")
    ask = await c.post("/admin/tenants/acme/keys/acme-2026-11/retire",
                       data={"when": "now", **_csrf("tenant-retire:acme:acme-2026-11", session)})
    assert ask.status_code == 409 and 'id="retire-refused"' in ask.text and 'name="confirm"' not in ask.text
    assert "key acme-2026-10, the last of them, stops verifying at" in ask.text
    forced = await c.post("/admin/tenants/acme/keys/acme-2026-11/retire",
                          data={"when": "now", "confirm": "1", **_csrf("tenant-retire:acme:acme-2026-11", session)})
    assert forced.status_code == 409 and "retiring too" in forced.text and path.read_text("utf-8") == before
