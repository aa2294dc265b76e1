"""gateway/serve/server.py: what the HTTP server (hypercorn) does before kbgate's code runs, against
a real `kbgate serve` on a free port, driven with raw sockets: request headers are bounded in
time, and the server's own answers are the documented ones.
"""

from __future__ import annotations

import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.support.configs import acme_toml
from tests.support.harness import Server, acme_server, free_port, kbgate_argv

SECRET = "server-test-secret-Lq83Nz0p"


@pytest.fixture(name="server", scope="module")
def _server(tmp_path_factory: pytest.TempPathFactory, docs_index: Path,
            redis_url: str) -> Iterator[tuple[Server, int]]:
    with acme_server(tmp_path_factory.mktemp("server"), docs_index, redis_url=redis_url, secret=SECRET, name="server",
                     server={"keep_alive_seconds": 2.0}) as gw:
        yield gw, gw.port


def raw(port: int, data: bytes) -> bytes:
    """Send `data` on a new connection; everything the server sends until it closes or answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(data)
        out = b""
        while True:
            part = s.recv(65536)
            if not part:
                return out
            out += part
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), None)
                if length is not None and len(body) >= length:
                    return out


def test_trickled_headers_are_cut_off_in_bounded_time(server: tuple[Server, int]) -> None:
    # one header byte every 0.3 s used to hold the connection for 75 s.
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\n")
        closed = False
        for byte in b"X-Slow: " + b"a" * 200:
            try:
                s.sendall(bytes([byte]))
            except OSError:  # reset by the server
                closed = True
                break
            time.sleep(0.3)
            if time.monotonic() - t0 > 8:
                break
        took = time.monotonic() - t0
        if not closed:
            s.settimeout(2)
            try:
                closed = s.recv(4096) == b""
            except OSError:
                closed = True
    assert closed, "the server still waits for the headers"
    assert took < 4.0, took  # server.keep_alive_seconds = 2, plus one trickle step and slack


def test_idle_keep_alive_connection_is_closed_after_keep_alive_seconds(server: tuple[Server, int]) -> None:
    _, port = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b'{"status":"ok"}'):
            part = s.recv(4096)
            assert part, answer
            answer += part
        assert answer.startswith(b"HTTP/1.1 200")
        t0 = time.monotonic()
        assert s.recv(4096) == b""  # closed by the server, not by our 10 s timeout
        assert 1.5 < time.monotonic() - t0 < 4.0


def test_oversized_headers_get_the_servers_bare_431(server: tuple[Server, int]) -> None:
    _, port = server
    big = raw(port, b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (100 * 1024)
              + b"\r\nContent-Length: 2\r\n\r\n{}")
    # More than one read: h11 holds an incomplete header block over 16 KiB and refuses it.
    assert big.startswith(b"HTTP/1.1 431"), big[:100]
    # the server's own answer (docs/volcengine-console.md, "Decisions where the callback spec is silent")
    assert big.partition(b"\r\n\r\n")[2] == b""


def test_large_headers_below_the_servers_limit_get_the_envelope(server: tuple[Server, int]) -> None:
    _, port = server
    below = raw(port, b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-Big: "
                + b"a" * (12 * 1024) + b"\r\nContent-Length: 2\r\n\r\n{}")
    assert below.startswith(b"HTTP/1.1 400"), below[:100]
    assert orjson.loads(below.partition(b"\r\n\r\n")[2])["Ret"] == 40001  # kbgate: signing headers missing


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", b"501"),
    (b"NOT HTTP AT ALL\r\n\r\n", b"400"),
    (b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nBad Header Name: v\r\n\r\n", b"400"),
])
def test_malformed_http_gets_the_servers_documented_bare_answer(server: tuple[Server, int], request_bytes: bytes,
                                                                status: bytes) -> None:
    _, port = server
    out = raw(port, request_bytes)
    assert out.startswith(b"HTTP/1.1 " + status), out[:100]
    assert out.partition(b"\r\n\r\n")[2] == b""


def test_config_bounds_keep_alive_seconds(tmp_path: Path) -> None:
    from gateway.core.config import parse_config
    from gateway.core.errors import ConfigError

    assert parse_config({}, base_dir=tmp_path, env={}).server.keep_alive_seconds == 10.0
    with pytest.raises(ConfigError) as exc:
        parse_config({"server": {"keep_alive_seconds": 0}}, base_dir=tmp_path, env={})
    assert exc.value.key == "server.keep_alive_seconds"


def test_a_server_start_and_stop_leaves_nothing_in_the_temp_folder(tmp_path: Path, docs_index: Path, redis_url: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # the harness's own log and the server's metrics folder: what `make test` left behind
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))  # where the harness makes its log
    (tmp_path / "secret").write_text(SECRET)
    port = free_port()
    cfg = tmp_path / "gateway.toml"
    cfg.write_text(acme_toml(docs_index, port=port, redis_url=redis_url, prefix=f"kbgate-tmp-{port}", workers=1,
                             secrets=[("k1", "secret")]), "utf-8")
    with Server(kbgate_argv(cfg), port, env={"TMPDIR": str(tmp)}) as srv:
        assert {p.name.split("-")[1] for p in tmp.iterdir()} == {"serve", "metrics"}
    assert list(tmp.iterdir()) == []
    assert "Running on http" in srv.logs()  # the log's text outlives its file
