"""gateway.ops.probe against a real local HTTP server: what an answer holds is shown, never
run on the operator's terminal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson
import pytest

from gateway.ops.probe import probe

HOSTILE = {"Ret": 0, "Msg": "ok\x1b[2J", "Result": [
    {"Id": "a\x1b]0;owned\x07", "Title": "标题\x1b[31m\nforged line", "Summary": "摘要\r\x1b]8;;https://x\x1b\\link"}]}


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = orjson.dumps(HOSTILE)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.fixture(name="url")
def _url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/volcengine/acme"
    finally:
        server.shutdown()
        server.server_close()


def test_probe_escapes_every_field_of_the_answer_it_prints(url: str) -> None:
    """Id, Title and Summary reached the terminal raw: ESC, OSC and a line break of their own."""
    text = probe(url, secret=None, first="a", second="b", query="q").explain()
    assert "\x1b" not in text and "\x07" not in text and "\r" not in text, text
    assert "forged line" in text and "\nforged line" not in text
    listed = [line for line in text.splitlines() if line.startswith("   - [")]
    assert len(listed) == 1 and "标题" in listed[0] and "摘要" in listed[0], text
