"""gateway/console/i18n.py and language.py: zh-CN first, English on request, nothing untranslated.

Rationale: docs/design-notes.md, "tests/console/test_i18n.py".
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import jinja2
import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po
from jinja2 import nodes
from starlette.datastructures import Headers

from gateway.console import i18n
from gateway.console.language import choose, from_accept_language, safe_next
from gateway.console.render import TEMPLATES
from gateway.core.clock import SYSTEM_CLOCK
from gateway.core.config import load_config
from tests.support.configs import ADMIN_TOKEN, ENV, two_tenants

ROOT = Path(__file__).resolve().parents[2]
# Names shown as they are in every language: the product, protocol fields, formats, codes.
# "admin" is the admin token's user name, "guide" an example folder (placeholder="guide/").
ALLOWED = {"kbgate", "FirstLevelId", "SecondLevelId", "Ret", "HTTP", "BM25", "Msg", "ms", "Agent", "HMAC", "admin",
           "guide"}
WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]+|[\u3400-\u9fff]+")  # Latin words and CJK runs


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(extensions=["jinja2.ext.i18n"], trim_blocks=True, lstrip_blocks=True)
    env.policies["ext.i18n.trimmed"] = True
    return env


def _data(node: nodes.Node) -> list[str]:
    """The literal text under `node`, skipping `{% block style %}` (CSS is not shown)."""
    if isinstance(node, nodes.Block) and node.name == "style":
        return []
    if isinstance(node, nodes.TemplateData):
        return [node.data]
    return [d for child in node.iter_child_nodes() for d in _data(child)]


def _template_text(source: str) -> list[str]:
    """The words of a template's literal text outside `_()`/`{% trans %}`, as the page shows
    them: markup and the attributes a reader never sees (class, href, data-*) left out, the
    ones read aloud or shown (aria-label, alt, title, placeholder) kept."""
    text = " ".join(_data(_environment().parse(source)))
    shown = re.findall(r'(?:aria-label|alt|title|placeholder)="([^"]*)"', text)
    text = re.sub(r"<[^>]*>", " ", text)
    return [w for part in [text, *shown] for w in WORD.findall(part)]


@pytest.mark.parametrize("name", sorted(p.name for p in TEMPLATES.glob("*") if p.suffix in (".html", ".svg")))
def test_a_template_has_no_untranslated_text(name: str) -> None:
    words = set(_template_text((TEMPLATES / name).read_text(encoding="utf-8"))) - ALLOWED
    assert not words, f"{name}: untranslated literal text {sorted(words)}"


def test_the_scan_finds_literal_text() -> None:
    assert _template_text("<p>Hello {{ _('World') }}</p>") == ["Hello"]
    assert _template_text("<p>{% trans %}Hello{% endtrans %}</p>") == []
    assert _template_text('<a aria-label="Open it" class="muted">x</a>') == ["Open", "it"]
    assert _template_text("<dt>一级路径 {{ n }}</dt>") == ["一级路径"]
    assert _template_text("{% block style %}p{color:red}{% endblock %}<p>no hit</p>") == ["no", "hit"]


def _extracted() -> set[str]:
    with (ROOT / "babel.cfg").open() as f:
        method_map, options_map = parse_mapping_cfg(f, "babel.cfg")
    ids: set[str] = set()
    for _file, _line, message, _comments, _context in extract_from_dir(str(ROOT), method_map, options_map):
        ids.add(message[0] if isinstance(message, tuple) else message)
    return ids


def _catalog(locale: str) -> Any:
    with (i18n.CATALOGS / locale / "LC_MESSAGES" / "messages.po").open("rb") as f:
        return read_po(f, locale=locale)


def test_every_msgid_has_a_chinese_translation_and_none_is_stale() -> None:
    used = _extracted()
    catalog = _catalog("zh_CN")
    known = {m.id[0] if isinstance(m.id, tuple) else m.id: m for m in catalog if m.id}
    missing = sorted(i for i in used if i not in known or not all(
        known[i].string if isinstance(known[i].string, tuple) else (known[i].string,)))
    stale = sorted(set(known) - used)
    assert not missing, f"untranslated: run `make messages`, then translate {missing[:20]}"
    assert not stale, f"catalog entries no source uses (run `make messages`): {stale[:20]}"
    assert len(used) > 300


def test_translations_keep_their_placeholders() -> None:
    holder = re.compile(r"%(?:\([a-z_]+\))?[sd%]")
    for m in _catalog("zh_CN"):
        if not m.id or isinstance(m.id, tuple):
            continue
        assert sorted(holder.findall(m.id)) == sorted(holder.findall(m.string)), m.id


@pytest.mark.parametrize(("header", "locale"), [
    ("", None), ("en", "en"), ("en-US,en;q=0.9", "en"), ("zh-TW", "zh_CN"), ("fr, en;q=0.5", "en"),
    ("en;q=0.4, zh;q=0.8", "zh_CN"), ("fr", None), ("en;q=0", None), ("en;q=abc", None), ("*", None),
])
def test_accept_language(header: str, locale: str | None) -> None:
    assert from_accept_language(header) == locale


def test_the_cookie_beats_the_header_and_zh_cn_is_the_default() -> None:
    assert choose(Headers({}), {}) == "zh_CN"
    assert choose(Headers({}), {}, tool=True) == "en"  # a script reads English unless it asks
    assert choose(Headers({"accept-language": "zh-CN"}), {}, tool=True) == "zh_CN"
    assert choose(Headers({"accept-language": "en"}), {}) == "en"
    assert choose(Headers({"accept-language": "en"}), {"kbgate_lang": "zh-CN"}) == "zh_CN"
    assert choose(Headers({}), {"kbgate_lang": "en"}) == "en"
    assert choose(Headers({"accept-language": "en"}), {"kbgate_lang": "xx"}) == "en"


@pytest.mark.parametrize(("value", "safe"), [
    ("/admin/gaps", "/admin/gaps"), ("/admin/try?gap=abc", "/admin/try?gap=abc"), ("/admin", "/admin"),
    ("//evil.example/admin", "/admin/"), ("https://evil.example/", "/admin/"), ("/admin/\\evil", "/admin/"),
    ("/admin//evil.example", "/admin/"), ("/elsewhere", "/admin/"), ("", "/admin/"),
    ("/admin/../x", "/admin/"), ("/admin/%2e%2e/x", "/admin/"), ("/admin/.", "/admin/"),
    ("/admin/docs..md?x=../y", "/admin/docs..md?x=../y"),
])
def test_the_switch_goes_back_only_to_a_console_path(value: str, safe: str) -> None:
    assert safe_next(value) == safe


@pytest.fixture(name="client")
async def _client(tmp_path: Path, docs_index: Path, start_app: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    c, _, _ = await start_app(load_config(two_tenants(tmp_path, docs_index)), clock=SYSTEM_CLOCK)
    c.headers.pop("accept-language", None)  # a browser that says nothing
    return c


AUTH = {"authorization": f"Bearer {ADMIN_TOKEN}"}
pytestmark = pytest.mark.anyio


async def test_pages_answer_in_chinese_by_default(client: httpx.AsyncClient) -> None:
    login = await client.get("/admin/login")
    assert login.status_code == 200
    assert '<html lang="zh-CN">' in login.text and "登录" in login.text and "Log in" not in login.text
    page = await client.get("/admin/", headers=AUTH)
    assert '<html lang="zh-CN">' in page.text
    for word in ("概览", "知识缺口", "召回测试", "知识库", "同义词", "租户", "每日提问", "路由"):
        assert word in page.text, word
    assert ">Overview<" not in page.text
    gaps = await client.get("/admin/gaps", headers=AUTH)
    assert "kbgate：知识缺口" in gaps.text
    missing = await client.get("/admin/tenants/nobody", headers=AUTH)
    assert missing.status_code == 404 and "没有该租户" in missing.text
    chart = await client.get("/admin/overview/chart.svg", headers=AUTH)
    assert "每日提问" in chart.text


async def test_english_on_accept_language_and_the_cookie_beats_it(client: httpx.AsyncClient) -> None:
    page = await client.get("/admin/", headers={**AUTH, "accept-language": "en-GB,en;q=0.9,zh;q=0.5"})
    assert '<html lang="en">' in page.text and ">Overview<" in page.text and "概览" not in page.text
    switched = await client.get("/admin/language", params={"to": "zh-CN", "next": "/admin/gaps"})
    assert switched.status_code == 303 and switched.headers["location"] == "/admin/gaps"
    assert "kbgate_lang=zh-CN" in switched.headers["set-cookie"] and "Path=/admin" in switched.headers["set-cookie"]
    again = await client.get("/admin/", headers={**AUTH, "accept-language": "en"})
    assert '<html lang="zh-CN">' in again.text and "概览" in again.text
    back = await client.get("/admin/language", params={"to": "en", "next": "https://evil.example/"})
    assert back.headers["location"] == "/admin/"
    english = await client.get("/admin/", headers=AUTH)
    assert '<html lang="en">' in english.text


async def test_the_header_links_to_both_languages_from_every_page(client: httpx.AsyncClient) -> None:
    page = await client.get("/admin/gaps", headers=AUTH)
    assert 'href="/admin/language?to=en&amp;next=%2Fadmin%2Fgaps" lang="en" hreflang="en"' in page.text
    assert 'lang="zh-CN" hreflang="zh-CN" aria-current="true">中文<' in page.text
    login = await client.get("/admin/login")
    assert "/admin/language?to=en" in login.text  # before logging in too


async def test_a_refusal_page_is_chinese_and_a_tools_json_error_english(client: httpx.AsyncClient) -> None:
    form = await client.post("/admin/logout", data={"csrf": "x"})
    assert form.status_code == 403 and "表单被拒绝" in form.text
    tool = await client.get("/admin/overview.json")
    assert tool.status_code == 401 and "login required" in tool.json()["error"]
    filed = await client.post("/admin/gaps/file", headers=AUTH, json={"group": "abc"})
    assert filed.status_code == 400 and "at least its first" in filed.json()["error"]
    asked = await client.post("/admin/gaps/file", headers={**AUTH, "accept-language": "zh-CN"}, json={"group": "abc"})
    assert "请给出分组 ID" in asked.json()["error"]
