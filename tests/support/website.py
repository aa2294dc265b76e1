"""A real website for the sync tests: Starlette under hypercorn, in its own process, serving the
files of the folder $KBGATE_SITE_DIR as they are at each request (a test edits, adds and deletes
files between syncs).

Rationale: docs/design-notes.md, "tests/support/website.py".
"""

from __future__ import annotations

import email.utils
import hashlib
import os
from pathlib import Path
from typing import Any

from tests.support import local_server

TYPES = {".html": "text/html; charset=utf-8", ".pdf": "application/pdf", ".png": "image/png"}


def make_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import PlainTextResponse, RedirectResponse, Response
    from starlette.routing import Route

    site = Path(os.environ["KBGATE_SITE_DIR"])
    log = site.parent / "requests.log"

    def logged(request: Request, response: Response) -> Response:
        with log.open("a", encoding="utf-8") as fh:
            fh.write(f"{request.url.path} {response.status_code}\n")
        return response

    async def robots(request: Request) -> Response:
        extra = site / "robots.txt"
        more = extra.read_text(encoding="utf-8") if extra.is_file() else ""
        return logged(request, PlainTextResponse("User-agent: *\nDisallow: /private/\n" + more))

    async def sitemap(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        rows = []
        for f in sorted(site.rglob("*")):
            if f.suffix in (".html", ".pdf") and f.is_file():
                lastmod = "" if request.query_params.get("lastmod") == "0" else \
                    f"<lastmod>{_iso(f.stat().st_mtime)}</lastmod>"
                rows.append(f"<url><loc>{base}/{f.relative_to(site).as_posix()}</loc>{lastmod}</url>")
        body = ('<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
                + "".join(rows) + "</urlset>")
        return logged(request, Response(body, media_type="application/xml"))

    async def page(request: Request) -> Response:
        path = request.path_params["path"]
        if path == "old.html":
            return logged(request, RedirectResponse("/guide/a.html", status_code=301))
        if path == "broken.html":
            return logged(request, PlainTextResponse("boom", status_code=500))
        f = site / path
        if not f.is_file() or ".." in path.split("/"):
            return logged(request, PlainTextResponse("not found", status_code=404))
        data = f.read_bytes()
        etag = f'"{hashlib.sha256(data).hexdigest()[:32]}"'
        headers = {"ETag": etag, "Last-Modified": email.utils.formatdate(f.stat().st_mtime, usegmt=True)}
        if request.headers.get("if-none-match") == etag:
            return logged(request, Response(status_code=304, headers=headers))
        return logged(request, Response(data, headers=headers, media_type=TYPES.get(f.suffix, "text/plain")))

    async def ready(request: Request) -> Response:
        return PlainTextResponse("ok")

    return Starlette(routes=[Route("/readyz", ready), Route("/robots.txt", robots), Route("/sitemap.xml", sitemap),
                             Route("/{path:path}", page)])


def _iso(mtime: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(mtime, dt.UTC).isoformat(timespec="microseconds")


if __name__ == "__main__":
    local_server.main(make_app)
