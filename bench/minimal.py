"""The minimal correct gateway: what a newcomer could hand-build for the callback alone.

Rationale: docs/design-notes.md, "bench/minimal.py".
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import sys
import time
from pathlib import Path

import orjson
import redis.asyncio as aioredis
import rjieba
import tantivy
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

TOLERANCE = 300
_FORMATS = {"x-content-timestamp": re.compile(r"[0-9]{10}"), "x-content-nonce": re.compile(r"[A-Za-z0-9]{6,32}"),
            "x-content-signature": re.compile(r"[0-9a-fA-F]{64}")}


def _schema() -> tantivy.Schema:
    sb = tantivy.SchemaBuilder()
    sb.add_text_field("words", stored=False, tokenizer_name="whitespace")
    sb.add_text_field("doc_id", stored=True, index_option="basic", tokenizer_name="raw")
    for name in ("title", "text"):  # stored only
        sb.add_bytes_field(name, stored=True, indexed=False)
    return sb.build()


def words(text: str) -> list[str]:
    """rjieba `cut_for_search` words of `text` lower-cased, blanks dropped."""
    return [w for w in rjieba.cut_for_search(text.lower()) if w.strip()]


def build_index(folder: Path, documents: list[tuple[str, str, list[str]]]) -> int:
    """Index (doc_id, title, [chunk texts]) in `folder` (a chunk: a section, its heading line
    first); returns the number of chunks."""
    folder.mkdir(parents=True, exist_ok=True)
    index = tantivy.Index(_schema(), path=str(folder))
    writer = index.writer(heap_size=128_000_000)
    n = 0
    for doc_id, title, sections in documents:
        for text in sections:
            writer.add_document(tantivy.Document(words=" ".join(words(text)), doc_id=doc_id,
                                                 title=title.encode(), text=text.encode()))
            n += 1
    writer.commit()
    writer.wait_merging_threads()
    return n


def _open(folder: Path) -> tantivy.Index:
    index = tantivy.Index.open(str(folder))
    index.reload()
    return index


def _problem(ret: int, msg: str, status: int) -> Response:
    return Response(orjson.dumps({"Ret": ret, "Msg": msg, "Result": []}), status, media_type="application/json")


async def callback(request: Request) -> Response:
    h = request.headers
    if any(not (v := h.get(name)) or not rx.fullmatch(v) for name, rx in _FORMATS.items()):
        return _problem(40001, "signing header missing or malformed", 400)
    ts, nonce, signature = h["x-content-timestamp"], h["x-content-nonce"], h["x-content-signature"]
    if abs(time.time() - int(ts)) > TOLERANCE:
        return _problem(40101, "timestamp expired", 401)
    body = await request.body()
    mac = hmac.new(SECRET, ts.encode() + nonce.encode() + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(mac, signature.lower()):
        return _problem(40102, "signature mismatch", 401)
    if not await REDIS.set(f"{PREFIX}:nonce:{ts}:{nonce}", 1, nx=True, ex=2 * TOLERANCE + 1):
        return _problem(40901, "replayed", 409)
    try:
        req = orjson.loads(body)
        index = INDEXES[(req["FirstLevelId"], req["SecondLevelId"])]
        query, limit = str(req["Query"]), min(int(req.get("Limit") or 5), 5)
    except (ValueError, KeyError, TypeError):
        return _problem(40003, "bad body", 400)
    searcher = index.searcher()
    terms = [tantivy.Query.term_query(index.schema, "words", w) for w in dict.fromkeys(words(query))]
    results: list[dict[str, str]] = []
    if terms:
        seen: set[str] = set()
        for _, address in searcher.search(tantivy.Query.boolean_query(
                [(tantivy.Occur.Should, t) for t in terms]), 10 * limit).hits:
            doc = searcher.doc(address)
            doc_id = doc.get_first("doc_id")
            if doc_id in seen:
                continue
            seen.add(doc_id)
            text = doc.get_first("text").decode()
            results.append({"Id": doc_id, "Title": doc.get_first("title").decode(), "Summary": text[:200],
                            "KnowledgeContent": text[:1500]})
            if len(results) == limit:
                break
    return Response(orjson.dumps({"Ret": 0, "Msg": "success", "Result": results}), media_type="application/json")


async def ready(request: Request) -> Response:
    return Response(b'{"status":"ready"}', media_type="application/json")


if os.environ.get("BENCH_MINIMAL_SECRET"):  # a worker: load what the callback needs once
    SECRET = Path(os.environ["BENCH_MINIMAL_SECRET"]).read_text().strip().encode()
    REDIS = aioredis.Redis.from_url(os.environ["BENCH_MINIMAL_REDIS"])
    PREFIX = os.environ.get("BENCH_MINIMAL_PREFIX", "minimal")
    INDEXES = {("bench", p.name): _open(p) for p in Path(os.environ["BENCH_MINIMAL_INDEXES"]).iterdir()}
app = Starlette(routes=[Route("/readyz", ready), Route("/volcengine/{tenant}", callback, methods=["POST"])])


def main(argv: list[str] | None = None) -> int:
    """Serve `app` on the hypercorn settings of `--config` (as bench.floor)."""
    from bench.floor import serve_on_gateway_settings

    return serve_on_gateway_settings("bench.minimal:app", argv)


if __name__ == "__main__":
    sys.exit(main())
