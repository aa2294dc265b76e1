"""gateway/console: the deliveries page through the ASGI app (the browser test is separate).

Token handling (hash only, Bearer, cookie flags, constant-time check), the 404 when no
token is configured, filters, escaping, and that neither secrets nor query text show.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

from gateway.console.auth import bearer, token_digest, token_ok
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config, parse_config
from gateway.core.errors import ConfigError
from tests.support.callbacks import body, signed
from tests.support.configs import ADMIN_TOKEN, ENV, SECRET_ACME, SECRET_BETA, SECRETS, two_tenants
from tests.support.console import login, logout

pytestmark = pytest.mark.anyio
AUTH = {"authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture(name="client")
def _client(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """client(**two_tenants options) → a client of a fresh app on the wall clock."""
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    made = iter(range(1000))

    async def factory(**kw: Any) -> httpx.AsyncClient:
        sub = tmp_path / f"s{next(made)}"
        sub.mkdir()
        c, _, _ = await start_app(load_config(two_tenants(sub, docs_index, **kw)), clock=SYSTEM_CLOCK)
        return c  # type: ignore[no-any-return]

    return factory


async def send(c: httpx.AsyncClient, tenant: str = "acme", secret: str = SECRET_ACME, **kw: Any) -> httpx.Response:
    raw = body(**kw)
    return await c.post(f"/volcengine/{tenant}", content=raw, headers=signed(secret, raw))


def test_token_check() -> None:
    digest = token_digest(ADMIN_TOKEN)
    assert token_ok(ADMIN_TOKEN, digest)
    assert not token_ok(ADMIN_TOKEN + "x", digest)
    assert not token_ok(ADMIN_TOKEN, None)
    assert not token_ok(None, digest)
    assert not token_ok("short", token_digest("short"))  # under 16 characters
    assert not token_ok("a token with spaces!", token_digest("a token with spaces!"))
    assert bearer(f"Bearer {ADMIN_TOKEN}") == ADMIN_TOKEN and bearer(f"bearer  {ADMIN_TOKEN}") == ADMIN_TOKEN
    assert bearer(f"Basic {ADMIN_TOKEN}") is None and bearer(None) is None and bearer("Bearer ") is None


@pytest.mark.parametrize("value", [ADMIN_TOKEN, "A" * 64, "abc", 777])
def test_config_token_must_be_a_digest_and_is_never_echoed(tmp_path: Path, value: Any) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config({"admin": {"token_sha256": value}}, base_dir=tmp_path, env={})
    assert exc.value.key == "admin.token_sha256"
    assert str(value) not in str(exc.value)


def test_config_admin_defaults_and_keys(tmp_path: Path) -> None:
    cfg = parse_config({}, base_dir=tmp_path, env={})
    assert (cfg.admin.token_sha256, cfg.admin.show_queries, cfg.admin.keep_deliveries) == (None, False, 200)
    with pytest.raises(ConfigError, match="admin.show_queries"):
        parse_config({"admin": {"show_queries": "yes"}}, base_dir=tmp_path, env={})
    with pytest.raises(ConfigError, match="admin.keep_deliveries"):
        parse_config({"admin": {"keep_deliveries": 0}}, base_dir=tmp_path, env={})
    with pytest.raises(ConfigError, match="admin.token"):
        parse_config({"admin": {"token": "x"}}, base_dir=tmp_path, env={})


@pytest.mark.parametrize("path", ["/admin/", "/admin", "/admin/deliveries", "/admin/deliveries.json", "/admin/gaps",
                                  "/admin/users"])
async def test_disabled_without_token_is_404(client: Any, path: str) -> None:
    c = await client(admin=False)
    assert (await c.get(path, headers=AUTH)).status_code == 404
    assert (await c.post("/admin/login", data={"token": ADMIN_TOKEN})).status_code == 404


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
async def test_other_methods_on_deliveries_json_are_a_json_405_with_allow(client: Any, method: str) -> None:
    # It was Starlette's plain-text "Method Not Allowed" beside JSON answers.
    c = await client()
    r = await c.request(method, "/admin/deliveries.json", headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD", r.text
    assert r.headers["content-type"] == "application/json" and r.headers["cache-control"] == "no-store"
    assert r.json() == {"error": "method_not_allowed", "allow": ["GET", "HEAD"],
                        "message": f"{method} is not allowed on /admin/deliveries.json; use GET or HEAD"}
    assert (await c.get("/admin/deliveries.json", headers=AUTH)).status_code == 200


@pytest.mark.parametrize(("path", "allow"), [("/admin/", "GET, HEAD"), ("/admin/deliveries", "GET, HEAD"),
                                             ("/admin", "GET, HEAD"),
                                             ("/admin/login", "POST"), ("/admin/logout", "POST")])
@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS"])
async def test_other_methods_on_admin_pages_are_405_with_allow(client: Any, path: str, allow: str,
                                                               method: str) -> None:
    c = await client()
    r = await c.request(method, path, headers=AUTH)
    assert r.status_code == 405 and r.headers["cache-control"] == "no-store"
    assert set(r.headers["allow"].split(", ")) == set(allow.split(", "))  # Starlette's order is a set's


async def test_no_or_wrong_token_gets_the_login_form(client: Any) -> None:
    c = await client()
    await send(c)
    for headers in ({}, {"authorization": "Bearer " + "x" * 31}, {"cookie": "kbgate_admin=" + "y" * 31}):
        r = await c.get("/admin/deliveries", headers=headers)
        assert r.status_code == 401
        assert 'name="token"' in r.text and "tech" not in r.text
    assert (await c.get("/admin/deliveries.json")).status_code == 401


async def test_bearer_shows_the_delivery_row(client: Any) -> None:
    c = await client()
    sent = await send(c)
    r = await c.get("/admin/deliveries", headers=AUTH)
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/html; charset=utf-8"
    assert '<meta charset="utf-8">' in r.text
    assert "default-src 'none'" in r.headers["content-security-policy"]
    assert r.headers["cache-control"] == "no-store"
    assert f'data-request-id="{sent.headers["x-request-id"]}"' in r.text
    for cell in ('<td data-label="FirstLevelId">tech</td>', '<td data-label="SecondLevelId">software</td>',
                 '<td data-label="Key id">acme-2026-11</td>', '<td data-label="Ret" class="num ret">0</td>'):
        assert cell in r.text
    assert "<link" not in r.text and "<script" not in r.text and "src=" not in r.text  # no external assets
    assert not any(s in r.text for s in SECRETS)
    assert "密钥轮换" not in r.text  # query text hidden by default


async def test_login_form_sets_strict_httponly_cookie(client: Any) -> None:
    c = await client()
    await send(c)
    bad = await login(c, token="not-the-token-at-all")
    assert bad.status_code == 401 and "kbgate_admin=" not in bad.headers.get("set-cookie", "")
    r = await login(c)
    assert r.status_code == 303 and r.headers["location"] == "/admin/"
    cookie = r.headers["set-cookie"]
    for flag in ("kbgate_admin=", "HttpOnly", "SameSite=strict", "Path=/admin", "Max-Age=28800"):
        assert flag.lower() in cookie.lower(), cookie
    page = await c.get("/admin/deliveries")  # the client keeps the cookie
    assert page.status_code == 200 and '<td data-label="FirstLevelId">tech</td>' in page.text
    out = await logout(c)
    assert out.status_code == 303
    assert (await c.get("/admin/deliveries")).status_code == 401


async def test_filters_by_tenant_and_outcome(client: Any) -> None:
    c = await client()
    await send(c)  # acme ok
    await send(c, secret="wrong-secret-for-acme")  # acme signature_mismatch
    await send(c, tenant="beta", secret=SECRET_BETA, first="产品", second="文档")  # beta ok
    r = await c.get("/admin/deliveries.json", headers=AUTH)
    assert len(r.json()["deliveries"]) == 3
    only_beta = await c.get("/admin/deliveries?tenant=beta", headers=AUTH)
    assert ">产品</td>" in only_beta.text and ">tech</td>" not in only_beta.text
    assert 'data-tenant="acme"' not in only_beta.text
    failed = await c.get("/admin/deliveries.json?outcome=failed", headers=AUTH)
    assert [d["outcome"] for d in failed.json()["deliveries"]] == ["signature_mismatch"]
    exact = await c.get("/admin/deliveries?outcome=signature_mismatch&tenant=acme", headers=AUTH)
    assert exact.text.count("<tr class=") == 1 and "40105" in exact.text
    ok = await c.get("/admin/deliveries.json?outcome=ok&tenant=acme", headers=AUTH)
    assert [(d["tenant"], d["ret"]) for d in ok.json()["deliveries"]] == [("acme", 0)]
    assert (await c.get("/admin/deliveries?tenant=nobody", headers=AUTH)).status_code == 400
    assert (await c.get("/admin/deliveries?outcome=bogus", headers=AUTH)).status_code == 400
    two = await c.get("/admin/deliveries.json?n=1", headers=AUTH)
    assert len(two.json()["deliveries"]) == 1


async def test_everything_is_escaped(client: Any) -> None:
    c = await client()
    evil = '<script>alert("x")</script>'
    r = await send(c, first=evil, second="<b>二级</b>")  # no such route: recorded as route_unknown
    assert orjson.loads(r.content)["Ret"] == 40402
    page = await c.get("/admin/deliveries", headers=AUTH)
    assert evil not in page.text and "<b>二级</b>" not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text  # Jinja2's escape
    assert "&lt;b&gt;二级&lt;/b&gt;" in page.text


async def test_query_column_only_when_enabled(client: Any) -> None:
    c = await client(show_queries=True)
    await send(c, query="如何<轮换>密钥")
    page = await c.get("/admin/deliveries", headers=AUTH)
    assert '<th scope="col">Query</th>' in page.text and '<td data-label="Query">如何&lt;轮换&gt;密钥</td>' in page.text
    hidden = await client()
    await send(hidden, query="如何轮换密钥")
    page = await hidden.get("/admin/deliveries", headers=AUTH)
    assert '<th scope="col">Query</th>' not in page.text and "如何轮换密钥" not in page.text


async def test_control_and_format_characters_are_shown_escaped(client: Any) -> None:
    c = await client(show_queries=True)
    r = await send(c, second="软件\x1b[2J\x07", query="如何\u202e轮换\u200b密钥")  # no such route
    assert orjson.loads(r.content)["Ret"] == 40402
    await send(c, query="如何\u202e轮换密钥")
    page = await c.get("/admin/deliveries", headers=AUTH)
    assert not any(ch in page.text for ch in "\x1b\x07\u202e\u200b"), "raw control or format characters"
    assert "软件\\x1b[2J\\x07" in page.text
    assert "如何\\u202e轮换\\u200b密钥" in page.text and "如何\\u202e轮换密钥" in page.text


@pytest.mark.parametrize(("path", "allow"), [("/admin/try.json", ["POST"]), ("/admin/gaps.json", ["GET", "HEAD"]),
                                             ("/admin/documents.json", ["GET", "HEAD"])])
async def test_the_owners_json_endpoints_answer_other_methods_with_a_json_405(client: Any, path: str,
                                                                              allow: list[str]) -> None:
    # They were Starlette's plain-text 405, beside the JSON they answer.
    c = await client()
    r = await c.request("DELETE", path, headers=AUTH)
    assert r.status_code == 405 and r.headers["allow"] == ", ".join(allow), r.text
    assert r.headers["content-type"] == "application/json" and r.json()["allow"] == allow
