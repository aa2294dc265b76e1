"""The admin story, on a real `kbgate serve` with Redis (`make run`'s config, its admin token read
as `make run` prints it), in a real headless Chromium, at 390 and 1280 px, by keyboard: create
index hr and upload its page → route hr/leave → hr for tenant demo → the connectivity test → add
a key (shown once: never in a redirect, the log, the audit or a refreshed page) → retire the old
one → test the new route → add ann, owner of only hr; she cannot touch demo-docs or the tenant
(refusals naming her role, nothing changed) and has no Users link. New controls are found by
ids, names and hrefs, so the story holds in any language of the pages; the browser asks for zh-CN,
so it runs in Chinese, as an admin in China sees it. Screenshots go to
test-artifacts/ (gitignored), with KBGATE_DOCS_SCREENSHOTS=1 to docs/img/ (docs/volcengine-console.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
import tomlkit

from gateway.console.csrf import form_token
from tests.support.browser import _browser, assert_fits, assert_fits_both, assert_keyboard, log_in  # noqa: F401
from tests.support.harness import Server, kbgate, serve
from tests.support.paths import ROOT

pytestmark = pytest.mark.browser

IMG = ROOT / "docs" / "img" if os.environ.get("KBGATE_DOCS_SCREENSHOTS") == "1" else ROOT / "test-artifacts"
HANDBOOK = {"leave.md": "---\ntitle: 年假制度\n---\n# 年假制度\n\n"
                        "员工入职满一年后每年享有五天带薪年假，需提前一周在系统中申请。\n"}
MISS = "火星基地的氧气配额是多少"


def _shot(page: Any, name: str, **kw: Any) -> None:
    """A screenshot of the viewport (or `clip`), quantized to 64 colours: a few tens of KB."""
    from PIL import Image

    IMG.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMG / name), **kw)
    with Image.open(IMG / name) as shot:
        small = shot.convert("RGB").quantize(colors=64, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(IMG / name, optimize=True)
    assert (IMG / name).stat().st_size < 90_000, name


@pytest.fixture(name="demo", scope="module")
def _demo(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[tuple[Server, Path]]:
    out = tmp_path_factory.mktemp("demo")
    subprocess.run([sys.executable, str(ROOT / "deploy" / "demo" / "configure.py"), str(out)], check=True)
    cfg = out / "gateway.toml"
    doc = tomlkit.parse(cfg.read_text("utf-8"))
    doc["replay"]["redis_url"] = redis_url  # type: ignore[index]
    doc["replay"]["key_prefix"] = f"kbgate-story-{os.getpid()}"  # type: ignore[index]
    doc["audit"] = {"sink": "file", "path": "audit.jsonl"}
    doc["gaps"] = {"flush_seconds": 0.1, "threshold": 0.0}
    cfg.write_text(tomlkit.dumps(doc), "utf-8")
    r = kbgate("index", "add", "--config", str(cfg), "--index", "demo-docs", "--no-progress",
               str(ROOT / "deploy" / "demo" / "docs"))
    assert r.returncode == 0, r.stderr
    with serve(cfg) as srv:
        yield srv, out


def _press(page: Any, name: str, limit: int = 120) -> None:
    """Tab (from where the focus is) to the control whose accessible text is `name`, then Enter,
    and wait for the page it leads to: the keyboard alone."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        text = page.evaluate("(document.activeElement.innerText || document.activeElement.value || '').trim()")
        if text == name:
            with page.expect_navigation():
                page.keyboard.press("Enter")
            return
    raise AssertionError(f"Tab never reached {name!r}")


def _tab_to(page: Any, selector: str, limit: int = 120) -> None:
    """Tab (from where the focus is) until the element matching `selector` has the focus."""
    target = page.locator(selector)
    for _ in range(limit):
        page.keyboard.press("Tab")
        if target.evaluate("el => el === document.activeElement"):
            return
    raise AssertionError(f"Tab never reached {selector!r}")


def _from_top(page: Any) -> None:
    page.evaluate("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    page.focus("a.skip")


def _reload_until(page: Any, selector: str, text: str, seconds: float = 10.0) -> None:
    """Key usage is written by the gateway's background bookkeeping just after the answer (every
    50 ms, gateway/core/background.py): reload the page until `selector` shows `text`, bounded."""
    deadline = time.monotonic() + seconds
    while text not in page.locator(selector).inner_text() and time.monotonic() < deadline:
        time.sleep(0.2)
        page.reload()


def test_the_admin_story(browser: Any, demo: tuple[Server, Path]) -> None:
    from playwright.sync_api import expect

    srv, out = demo
    admin_token = (out / "admin-token").read_text().strip()  # what `make run` prints: $(cat data/demo/admin-token)
    tenant_url = srv.base + "/admin/tenants/demo"
    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="zh-CN")  # the console in Chinese
    page = context.new_page()
    redirects: list[str] = []
    page.on("response", lambda r: redirects.append(r.headers.get("location", "")) if r.status == 303 else None)
    try:
        log_in(page, srv.base, admin_token)
        expect(page.locator("h1")).to_have_text("概览")
        _index_and_route(page, srv, out)
        page.locator('nav.console a[href="/admin/tenants"]').click()
        page.wait_for_url(srv.base + "/admin/tenants")
        page.get_by_role("link", name="租户 demo").click()
        page.wait_for_url(tenant_url)
        expect(page.locator("code.callback-url")).to_have_text(srv.base + "/volcengine/demo")
        expect(page.locator("b.key-to-paste")).to_have_text("demo-1")
        assert_fits_both(page, tenant_url)
        met = assert_keyboard(page)
        texts = {m["text"] for m in met}
        assert {"发送测试回调", "添加密钥"} <= texts and "停用密钥 demo-1" not in texts  # one key
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(tenant_url)
        _shot(page, "tenant-1280.png")

        # The connectivity test, by keyboard: a real signed callback over HTTP, its answer shown.
        _from_top(page)
        _press(page, "发送测试回调")
        assert re.fullmatch(re.escape(tenant_url) + r"\?test=[A-Za-z0-9_-]{22}#test", page.url), page.url
        answer = page.locator("#test-answer")
        expect(answer).to_contain_text("成功: HTTP 200, Ret 0")
        expect(answer).to_contain_text("用密钥 demo-1 签名")
        assert answer.locator("ol.results li").count() >= 1 and "ms" in answer.locator(".latency").inner_text()
        assert "连通性测试" not in answer.inner_text()  # admin.show_queries is off
        _shot(page, "tenant-test.png", clip={"x": 0, "y": answer.bounding_box()["y"] - 80, "width": 1280,
                                             "height": 360})
        _reload_until(page, 'tr[data-key="demo-1"] td.count', "1")
        expect(page.locator('tr[data-key="demo-1"] td.count')).to_have_text("1")

        # Rotation step 1, by keyboard: a generated key, shown once.
        _from_top(page)
        _press(page, "添加密钥")
        secret = page.locator("code.secret-value").inner_text()
        key_id = page.locator("#new-key").get_attribute("data-key") or ""
        assert len(secret) >= 32 and secret not in page.url
        assert (out / "secrets" / f"demo-{key_id}").read_text().strip() == secret
        page.set_viewport_size({"width": 390, "height": 800})
        page.locator("#new-key").scroll_into_view_if_needed()
        _shot(page, "tenant-new-key-390.png", mask=[page.locator("code.secret-value")])
        page.set_viewport_size({"width": 1280, "height": 800})
        page.reload()
        assert secret not in page.content() and "已经显示过了" in page.locator("#new-key").inner_text()

        # Step 3: the first delivery verified by the new key (the test signs with the newest key).
        expect(page.locator("select[name=key]")).to_have_value(key_id)
        _from_top(page)
        _press(page, "发送测试回调")
        expect(page.locator("#test-answer")).to_contain_text(f"用密钥 {key_id} 签名")
        _reload_until(page, ".step3", "已验证 1 次回调")
        expect(page.locator(".step3")).to_contain_text("已验证 1 次回调")

        # Two live keys: every control (the retire form's too) by Tab, with distinct names, at both widths.
        page.goto(tenant_url)
        assert "停用密钥 demo-1" in {m["text"] for m in assert_keyboard(page)}
        assert_fits_both(page, tenant_url)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.goto(tenant_url)

        # Step 4, by keyboard: retire the old key. Nothing is preselected: the button alone does nothing.
        config_before = (out / "gateway.toml").read_text("utf-8")
        when = page.locator('form[action$="/keys/demo-1/retire"] select[name="when"]')
        expect(when).to_have_value("")
        page.locator("#rotation").scroll_into_view_if_needed()
        _shot(page, "tenant-rotation.png")
        _from_top(page)
        _tab_to(page, 'form[action$="/keys/demo-1/retire"] button')
        page.keyboard.press("Enter")  # the browser asks for a choice (required): no request is sent
        assert page.url == tenant_url and (out / "gateway.toml").read_text("utf-8") == config_before
        _from_top(page)
        _tab_to(page, 'form[action$="/keys/demo-1/retire"] select[name="when"]')
        page.keyboard.press("ArrowDown")  # the first choice after "请选择…": 立即 (now)
        expect(when).to_have_value("now")
        _press(page, "停用密钥 demo-1")
        # The confirmation: what stops and when, the other key; nothing changed yet.
        expect(page.locator("h1")).to_have_text("停用密钥 demo-1？")
        expect(page.locator("#retire-what")).to_contain_text("将立即停止验证")
        expect(page.locator("dl.facts")).to_contain_text(f"{key_id} (有效")
        assert (out / "gateway.toml").read_text("utf-8") == config_before
        for width in (390, 1280):
            page.set_viewport_size({"width": width, "height": 800})
            assert_fits(page, f"the retire confirmation at {width} px")
        _shot(page, "tenant-retire-confirm.png")
        _from_top(page)
        _tab_to(page, "a:text-is('不，保留密钥 demo-1')")  # the way back is a control too
        _press(page, "是，立即停用密钥 demo-1")
        page.wait_for_url(tenant_url + "#keys")
        expect(page.locator('tr[data-key="demo-1"] td.state')).to_contain_text("已停用 自 ")
        expect(page.locator(f'tr[data-key="{key_id}"] td.state')).to_have_text("有效")
        page.locator("#keys").scroll_into_view_if_needed()
        top = page.locator("#keys").bounding_box()["y"]
        _shot(page, "tenant-rotated.png", clip={"x": 0, "y": max(0, top - 10), "width": 1280, "height": 200})
        for _ in range(40):  # the worker reloads the config within a second
            old = httpx.post(srv.base + "/volcengine/demo", timeout=10, content=b"{}",
                             headers=_signed((out / "secret").read_text().strip(), b"{}"))
            if old.json()["Ret"] == 40105:
                break
            time.sleep(0.1)
        assert old.json()["Ret"] == 40105  # the retired key verifies nothing any more

        # The test's JSON twin, for a tool: the same answer, the question not echoed (show_queries off).
        twin = httpx.post(srv.base + "/admin/tenants/demo/test", timeout=30, data={"query": "密钥怎么轮换"},
                          headers={"authorization": f"Bearer {admin_token}"}).json()
        assert (twin["status"], twin["ret"], twin["msg"], twin["key_id"]) == (200, 0, "success", key_id)
        assert twin["results"] and twin["latency_ms"] > 0 and "query" not in twin and "密钥怎么轮换" not in srv.logs()

        # The secret: never in a redirect, the server log, the audit file.
        assert redirects and not any(secret in r for r in redirects)
        assert secret not in srv.logs() and secret not in (out / "audit.jsonl").read_text("utf-8")
        assert "连通性测试" not in srv.logs() and "连通性测试" not in (out / "audit.jsonl").read_text("utf-8")

        # The connectivity test on the new route (hr/leave → hr), by keyboard, signed with the new key.
        page.goto(tenant_url)
        _from_top(page)
        _tab_to(page, 'select[name="route"]')
        page.keyboard.type("hr")  # the select's type-ahead: option "hr/leave"
        expect(page.locator('select[name="route"]')).to_have_value("1")
        _tab_to(page, 'form[action$="/demo/test"] button[type="submit"]')
        with page.expect_navigation():
            page.keyboard.press("Enter")
        answer = page.locator("#test-answer")
        expect(answer).to_contain_text("Ret 0")
        expect(answer).to_contain_text(f"用密钥 {key_id} 签名")

        # An owner of only the new index, added from the Users page by keyboard.
        page.locator('nav.console a[href="/admin/users"]').click()
        page.wait_for_url(srv.base + "/admin/users")
        _from_top(page)
        _tab_to(page, 'form[action="/admin/users"] input[name="name"]')
        page.keyboard.type("ann")
        _tab_to(page, 'form[action="/admin/users"] select[name="role"]')
        page.keyboard.press("ArrowDown")  # from 查看者 (viewer) to 负责人 (owner)
        expect(page.locator('form[action="/admin/users"] select[name="role"]')).to_have_value("owner")
        _tab_to(page, 'form[action="/admin/users"] input[name="index.hr"]')
        page.keyboard.press("Space")
        _tab_to(page, 'form[action="/admin/users"] button[type="submit"]')
        with page.expect_navigation():
            page.keyboard.press("Enter")
        credential = page.locator("code.credential").inner_text()
        expect(page.locator('tr[data-user="ann"] td.role')).to_have_text("负责人")
        expect(page.locator('tr[data-user="ann"] td:nth-child(3)')).to_have_text("hr")  # only that index
        _shot(page, "users-added.png", mask=[page.locator("code.credential")])
        page.reload()
        assert credential not in page.content()
        assert "添加用户" in {m["text"] for m in assert_keyboard(page)}
        assert_fits_both(page, srv.base + "/admin/users")
        assert credential not in srv.logs() and credential not in (out / "audit.jsonl").read_text("utf-8")
        _owner_is_refused(browser, srv, out, admin_token, credential)
    finally:
        context.close()


def _index_and_route(page: Any, srv: Server, out: Path) -> None:
    """The admin creates index hr (lexical) from the Indexes page, uploads its first page, and
    routes hr/leave → hr for tenant demo from the tenant page: the keyboard alone for every
    control but the file picker, stable selectors (ids, names, hrefs), at 390 and 1280 px."""
    from playwright.sync_api import expect

    page.locator('nav.console a[href="/admin/indexes"]').click()
    page.wait_for_url(srv.base + "/admin/indexes")
    assert_fits_both(page, srv.base + "/admin/indexes")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(srv.base + "/admin/indexes")
    _from_top(page)
    _tab_to(page, "#new-index")
    page.keyboard.type("hr")
    _tab_to(page, "#new-index-kind")
    page.keyboard.press("ArrowDown")  # from 混合检索 (hybrid) to the lexical option
    expect(page.locator("#new-index-kind")).to_have_value("lexical")
    page.locator("#new-index").scroll_into_view_if_needed()
    _shot(page, "index-create.png")
    _tab_to(page, 'form[action="/admin/indexes/create"] button[type="submit"]')
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.url == srv.base + "/admin/indexes/hr"
    assert (out / "indexes" / "hr" / "meta.json").is_file() and not (out / "indexes" / "hr" / "dense").exists()
    page.set_input_files('form.upload input[name="file"]', files=[{
        "name": "leave.md", "mimeType": "text/markdown", "buffer": HANDBOOK["leave.md"].encode()}])
    _tab_to(page, 'form.upload button[type="submit"]')
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert_fits_both(page, srv.base + "/admin/indexes/hr")
    page.set_viewport_size({"width": 1280, "height": 800})

    page.goto(srv.base + "/admin/tenants/demo")
    _from_top(page)
    _tab_to(page, "#route-first")
    page.keyboard.type("hr")
    _tab_to(page, "#route-second")
    page.keyboard.type("leave")
    _tab_to(page, "#route-index")
    page.keyboard.type("hr")
    expect(page.locator("#route-index")).to_have_value("hr")
    page.locator("#route-add").scroll_into_view_if_needed()
    _shot(page, "tenant-route-add.png")
    _tab_to(page, '#route-add button[type="submit"]')
    with page.expect_navigation():
        page.keyboard.press("Enter")
    expect(page.locator("dl.paste")).to_contain_text("hr / leave → 知识库 hr")
    config = (out / "gateway.toml").read_text("utf-8")
    assert 'first_level_id = "hr"' in config and 'index = "hr"' in config
    for _ in range(50):  # the worker serves the new route once it reloads the file (within a second)
        routes = httpx.get(srv.base + "/readyz", timeout=10).json()["routes"]
        if any(r.get("index") == "hr" for r in routes):
            break
        time.sleep(0.1)
    assert any(r.get("index") == "hr" for r in routes), routes


def _signed(secret: str, raw: bytes) -> dict[str, str]:
    from tests.support.callbacks import signed

    return signed(secret, raw)


def _owner_is_refused(browser: Any, srv: Server, out: Path, admin_token: str, credential: str) -> None:
    """ann, owner of hr, logs in: she may open hr's edit form, but demo-docs' documents,
    its gaps and the tenant are refused, and nothing changes."""
    from playwright.sync_api import expect

    token = (out / "agent-token").read_text().strip()
    miss = httpx.post(srv.base + "/dify/retrieval", timeout=10, headers={"authorization": f"Bearer {token}"},
                      json={"knowledge_id": "docs", "query": MISS, "retrieval_setting": {"top_k": 3,
                                                                                         "score_threshold": 0.99}})
    assert miss.status_code == 200
    admin = {"authorization": f"Bearer {admin_token}"}
    groups: list[dict[str, Any]] = []
    for _ in range(50):
        groups = httpx.get(srv.base + "/admin/gaps.json", headers=admin).json()["groups"]
        if any(g["index"] == "demo-docs" for g in groups):  # (the tests' own question may be a gap of hr)
            break
        time.sleep(0.1)
    other = next(g for g in groups if g["index"] == "demo-docs")
    config_before = (out / "gateway.toml").read_text("utf-8")
    docs_before = httpx.get(srv.base + "/admin/indexes/demo-docs.json", headers=admin).json()

    context = browser.new_context(viewport={"width": 1280, "height": 800}, locale="zh-CN")
    page = context.new_page()
    try:
        log_in(page, srv.base, credential, user="ann")
        expect(page.locator("header .who span")).to_have_text("ann (hr 的负责人)")
        assert page.locator('nav.console a[href="/admin/users"]').count() == 0  # not hers to open
        login = next(c["value"] for c in context.cookies() if c["name"] == "kbgate_admin")  # her session
        mine = page.goto(srv.base + "/admin/indexes/hr/edit?id=leave.md")
        assert mine is not None and mine.status == 200  # her own index: the edit form

        theirs = page.goto(srv.base + "/admin/indexes/demo-docs/edit?id=ops/rotation.md")
        assert theirs is not None and theirs.status == 403
        refused = page.locator("[role=alert]")
        expect(refused).to_contain_text("您的角色（hr 的负责人）不能修改知识库 demo-docs 的文档；未做任何修改")
        _shot(page, "owner-refused.png", clip={"x": 0, "y": 0, "width": 1280, "height": 240})
        deleted = page.request.post(srv.base + "/admin/indexes/demo-docs/delete",
                                    form={"id": "ops/rotation.md", "csrf": form_token(login, "documents")})
        assert deleted.status == 403 and "未做任何修改" in deleted.text()
        assert httpx.get(srv.base + "/admin/indexes/demo-docs.json", headers=admin).json() == docs_before

        page.goto(srv.base + "/admin/gaps")
        assert other["id"] not in page.content()  # not her index's gap
        filed = page.request.post(srv.base + "/admin/gaps/file",
                                  form={"group": other["id"], "csrf": form_token(login, "gaps")})
        assert filed.status == 404  # another index's gap: refused as if absent, nothing filed
        after = httpx.get(srv.base + "/admin/gaps.json", headers=admin).json()["groups"]
        assert next(g for g in after if g["id"] == other["id"]) == other

        page.goto(srv.base + "/admin/tenants/demo")
        expect(page.locator("p.note")).to_contain_text("您的角色（hr 的负责人）可以查看本页")
        r = page.request.post(srv.base + "/admin/tenants/demo/keys",
                              form={"csrf": form_token(login, "tenant-add-key:demo")})
        assert r.status == 403 and "不能修改或测试租户" in r.text()
        page.goto(srv.base + "/admin/users")
        expect(page.locator("[role=alert]")).to_contain_text("您的角色（hr 的负责人）不能")
        assert (out / "gateway.toml").read_text("utf-8") == config_before
        audit = {(a["tool"], a["principal"]["id"], a["outcome"])
                 for a in (orjson.loads(x) for x in (out / "audit.jsonl").read_text("utf-8").splitlines())}
        assert {("admin.tenants.add_key", "ann", "denied"), ("admin.documents.edit", "ann", "denied"),
                ("admin.documents.delete", "ann", "denied")} <= audit
    finally:
        context.close()


def test_a_tenant_with_no_key_that_verifies_is_a_red_line_on_the_overview(browser: Any, tmp_path: Path,
                                                                         docs_index: Path, redis_url: str) -> None:
    import datetime as dt

    from playwright.sync_api import expect

    from tests.support.browser import assert_fits
    from tests.support.configs import ACME_KEYS, ADMIN_TOKEN, ENV, config, tenant, write
    from tests.support.harness import free_port

    port = free_port()
    gone = tenant("gone", keys=ACME_KEYS, routes=[("tech", "software", "kb")], path="/volcengine/gone")
    for s in gone["gone"]["secrets"]:
        s["not_after"] = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    data = config(tmp_path, tenants=[tenant("acme", keys=ACME_KEYS), gone], indexes=docs_index, port=port,
                  redis_url=redis_url, key_prefix=f"kbgate-keyless-{port}", admin_token=ADMIN_TOKEN,
                  audit={"sink": "off"})
    with serve(write(tmp_path / "gateway.toml", data), port=port, env=ENV) as srv:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        try:
            log_in(page, srv.base, ADMIN_TOKEN)
            line = page.locator('p.keyless[data-tenant="gone"]')
            expect(line).to_contain_text("tenant gone has no key that verifies")
            assert page.locator("p.keyless").count() == 1
            for width in (390, 1280):
                page.set_viewport_size({"width": width, "height": 800})
                assert_fits(page, f"the overview at {width} px")
            assert "Add a key to tenant gone" in {m["text"] for m in assert_keyboard(page)}
            _from_top(page)
            _press(page, "Add a key to tenant gone")
            assert page.url == srv.base + "/admin/tenants/gone#rotation"
            assert "tenant gone has no key that verifies" in " ".join(httpx.get(srv.base + "/readyz").json()["notes"])
        finally:
            page.close()
