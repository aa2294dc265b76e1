"""`kbgate sync` from a website (gateway/sync/web.py, fetch.py): a real HTTP server on a free port
(tests/support/website.py) serving a sitemap, pages with ETags and Last-Modified, a robots.txt that
disallows /private/, a redirect, a PDF and a failing page."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fpdf import FPDF

from tests.support.harness import Server, free_port
from tests.support.paths import ROOT
from tests.sync.helpers import counts, generation, ids, search_ids, sync, write_config

NAV = '<nav><a href="/">首页</a> <a href="/guide/">指南</a> <a href="/faq/">常见问题</a></nav>'
PAGE = ('<html><head><meta charset="utf-8"><title>{title}</title></head><body>' + NAV +
        "<main><h1>{title}</h1><p>{body}</p><h2>细节</h2><p>{detail}</p>{links}</main>"
        "<footer>版权所有 示例公司</footer></body></html>")


DETAIL = "更多说明见下文，这一段足够长以便正文提取保留它。"


def page(title: str, body: str, detail: str = DETAIL, links: str = "") -> str:
    return PAGE.format(title=title, body=body, detail=detail, links=links)


@pytest.fixture(name="site")
def _site(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / "site"
    (root / "guide").mkdir(parents=True)
    (root / "private").mkdir()
    links = "".join(f'<a href="{h}">{h}</a> ' for h in ("guide/a.html", "guide/b.html", "private/secret.html",
                                                          "old.html", "broken.html", "manual.pdf", "logo.png"))
    (root / "index.html").write_text(page("帮助中心", "欢迎使用帮助中心，这里汇总所有指南。", links=links),
                                     encoding="utf-8")
    (root / "guide" / "a.html").write_text(page("密钥轮换", "签名密钥应每九十天轮换一次。"), encoding="utf-8")
    (root / "guide" / "b.html").write_text(page("证书续期", "证书到期前三十天自动续期。"), encoding="utf-8")
    (root / "private" / "secret.html").write_text(page("内部", "机密内容不得抓取。"), encoding="utf-8")
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.multi_cell(0, 8, "Operations manual: restart the gateway with kbgate serve.")
    (root / "manual.pdf").write_bytes(bytes(pdf.output()))
    port = free_port()
    with Server([sys.executable, "-m", "tests.support.website", "--port", str(port)], port, cwd=ROOT,
                env={"KBGATE_SITE_DIR": str(root)}):
        yield f"http://127.0.0.1:{port}", root


def requests(root: Path) -> list[str]:
    log = root.parent / "requests.log"
    return log.read_text(encoding="utf-8").splitlines() if log.is_file() else []


def synced(tmp_path: Path, source: str) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """(the config of one index with `source`, the `kbgate sync` run of it)."""
    cfg = write_config(tmp_path, source)
    return cfg, sync(cfg)


def test_sitemap_sync_honours_robots_skips_unchanged_pages_and_deletes_removed_ones(site: tuple[str, Path],
                                                                                   tmp_path: Path) -> None:
    (base, root), host = site, site[0].removeprefix("http://")
    cfg, r = synced(tmp_path, f'name = "help"\ntype = "web"\nsitemap = "{base}/sitemap.xml"\n'
                              'requests_per_second = 50\ndataset = "help"')
    assert r.returncode == 0, r.stderr
    assert ids(cfg) == [f"help:{host}/guide/a.html", f"help:{host}/guide/b.html", f"help:{host}/index.html",
                        f"help:{host}/manual.pdf"]
    assert counts(r.stdout) == (4, 0, 0, 0)
    assert f"gone {base}/private/secret.html: robots.txt disallows it" in r.stderr
    assert not any(line.startswith("/private/") for line in requests(root))  # never requested
    [hit] = [h for h in _hits(cfg, "九十天 轮换") if h.doc_id.endswith("a.html")]
    assert hit.title == "密钥轮换" and hit.url == f"{base}/guide/a.html" and "首页" not in hit.content
    assert search_ids(cfg, "restart gateway")[:1] == [f"help:{host}/manual.pdf"]

    before, log_lines = generation(cfg), len(requests(root))
    r = sync(cfg)  # nothing changed: lastmod as recorded, no page fetched
    assert r.returncode == 0 and counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before
    assert sorted(requests(root)[log_lines:]) == ["/robots.txt 200", "/sitemap.xml 200"]

    (root / "guide" / "b.html").unlink()
    (root / "guide" / "a.html").write_text(page("密钥轮换", "签名密钥应每三十天轮换一次。"), encoding="utf-8")
    assert search_ids(cfg, "证书续期")[:1] == [f"help:{host}/guide/b.html"]
    r = sync(cfg)
    assert counts(r.stdout) == (0, 1, 0, 1)
    assert f"help:{host}/guide/b.html" not in search_ids(cfg, "证书续期")  # gone from answers
    assert search_ids(cfg, "三十天")[:1] == [f"help:{host}/guide/a.html"]


def _hits(cfg: Path, query: str) -> list[object]:
    from indexes.store import IndexStore

    return list(IndexStore(cfg.parent / "ix").open("docs").search(query, 10))


def test_a_crawl_uses_conditional_gets_follows_redirects_and_reports_a_failing_page(site: tuple[str, Path],
                                                                                   tmp_path: Path) -> None:
    (base, root), host = site, site[0].removeprefix("http://")
    cfg, r = synced(tmp_path, f'name = "crawl"\ntype = "web"\nstart_url = "{base}/index.html"\n'
                              "requests_per_second = 50\nmax_depth = 2")
    assert r.returncode == 1  # one page failed: reported, the others indexed
    assert f"error {base}/broken.html: HTTP 500 (kept as indexed)" in r.stderr
    assert ids(cfg) == [f"{host}/guide/a.html", f"{host}/guide/b.html", f"{host}/index.html", f"{host}/manual.pdf"]
    assert "/old.html 301" in requests(root) and "/logo.png 200" not in requests(root)
    assert not any(line.startswith("/private/") for line in requests(root))

    before, log_lines = generation(cfg), len(requests(root))
    r = sync(cfg)
    assert counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before
    again = requests(root)[log_lines:]
    assert {"/index.html 304", "/guide/a.html 304", "/guide/b.html 304", "/manual.pdf 304"} <= set(again)
    assert not any(line.endswith(" 200") and line.endswith(".html 200") for line in again)

    (root / "guide" / "b.html").write_text(page("证书续期", "证书到期前七天自动续期。"), encoding="utf-8")
    r = sync(cfg)
    assert counts(r.stdout) == (0, 1, 0, 0)
    assert search_ids(cfg, "七天 续期")[:1] == [f"{host}/guide/b.html"]


def test_a_sync_killed_before_its_commit_applies_nothing_and_the_next_run_completes(site: tuple[str, Path],
                                                                                      tmp_path: Path) -> None:
    base, root = site
    cfg = write_config(tmp_path, f'name = "help"\ntype = "web"\nsitemap = "{base}/sitemap.xml?lastmod=0"\n'
                                 "requests_per_second = 2")
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", "sync", "--config", str(cfg), "--no-progress"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(line.startswith("/guide/") for line in requests(root)) and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)  # mid-run: pages fetched, nothing committed
    proc.wait(timeout=30)
    folder = tmp_path / "ix" / "docs"
    assert not (folder / "kbgate-sync.json").exists()
    assert not (folder / "meta.json").exists() or ids(cfg) == []
    r = sync(cfg)
    assert r.returncode == 0 and counts(r.stdout) == (4, 0, 0, 0)
    before = generation(cfg)
    r = sync(cfg)  # no lastmod: every page asked again, each 304
    assert counts(r.stdout) == (0, 0, 0, 0) and generation(cfg) == before


def test_web_dry_run_changes_nothing(site: tuple[str, Path], tmp_path: Path) -> None:
    base, root = site
    cfg = write_config(tmp_path, f'name = "help"\ntype = "web"\nsitemap = "{base}/sitemap.xml"\n'
                                 "requests_per_second = 50")
    r = sync(cfg, "--dry-run")
    assert r.returncode == 0 and "would add 4, update 0, delete 0" in r.stdout
    assert not (tmp_path / "ix" / "docs").exists()
