"""A standing fuzz test: generated headers and bodies, valid signatures over hostile
bodies included, sent over raw sockets to a real `kbgate serve` on a free port.

Rationale: docs/design-notes.md, "tests/e2e/test_fuzz.py".
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gateway.core.errors import RET_TABLE
from tests.support.configs import tenant
from tests.support.harness import Server, acme_server

SECRET = "fuzz-secret-Wq83Lm2Nx0"
BODY_TIMEOUT = 0.5
MAX_BODY = 4096
SLACK = 2.5  # seconds beyond the body timeout: a loaded 2-core machine, one connection each
EXAMPLES = int(os.environ.get("KBGATE_FUZZ_EXAMPLES", "400"))
RET_STATUS = {row.ret: row.status for row in RET_TABLE}
SERVER_BARE = {400, 431, 501}  # hypercorn/h11 answers before kbgate runs: empty body
PLAIN = {(404, b"Not Found"), (405, b"Method Not Allowed")}  # outside every endpoint

_nonces = itertools.count()


@pytest.fixture(name="server", scope="module")
def _server(tmp_path_factory: pytest.TempPathFactory, docs_index: Path,
            redis_url: str) -> Iterator[tuple[Server, int]]:
    with acme_server(tmp_path_factory.mktemp("fuzz"), docs_index, redis_url=redis_url, secret=SECRET, name="fuzz",
                     more_tenants=[tenant("beta", verify="report")],
                     server={"body_timeout_seconds": BODY_TIMEOUT, "max_body_bytes": MAX_BODY}) as gw:
        yield gw, gw.port
        assert gw.proc.poll() is None  # it survived everything


# ------------------------------------------------------------------ generation

CALLBACK_PATHS = ["/volcengine/acme"] * 14 + ["/volcengine/beta"] * 3 + ["/volcengine/nobody", "/volcengine/"]
OTHER_PATHS = ["/agent-access/v1/tools/search", "/agent-api/v1/workspaces/x/knowledge/search", "/healthz",
               "/readyz", "/admin/deliveries.json", "/nowhere", "/volcengine/acme/extra", "/%ff%00", "//"]
latin1_text = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=60)
control_text = st.text(st.characters(min_codepoint=0, max_codepoint=0xFF, exclude_characters="\r\n"), max_size=20)
json_scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
                | st.floats(allow_nan=False) | st.text(max_size=80))
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(st.text(max_size=12), kids, max_size=4), max_leaves=12)
level_ids = st.sampled_from(["tech", "software", "1", "2", ""]) | json_values
queries = (st.sampled_from(["密钥轮换", "重放", "如何轮换密钥", " ", "", "a" * 600, "钥", "\u0000", "🔑" * 10])
           | st.text(max_size=200) | json_values)
limits = st.sampled_from([None, 1, 3, 5, 0, -1, 20, 21, 10**9, 5.0, 2.5, "3", True]) | json_values


def chance(n: int) -> st.SearchStrategy[bool]:
    """True about once in `n` draws (hypothesis favours small integers, so not `integers() == 0`)."""
    return st.sampled_from([False] * (n - 1) + [True])


def mostly(draw: st.DrawFn, usual: list[object], odd: st.SearchStrategy[object], odds: int = 6) -> object:
    """One of `usual` five times out of `odds`, else a value from `odd` (a `|` of strategies
    would weigh every branch alike and drown the requests that reach the search)."""
    if draw(chance(odds)):
        return draw(odd)
    return draw(st.sampled_from(usual))


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["shaped"] * 5 + ["json", "bytes", "text", "huge", "empty"]))
    if kind == "shaped":
        fields = {"FirstLevelId": mostly(draw, ["tech"], level_ids),
                  "SecondLevelId": mostly(draw, ["software"], level_ids),
                  "Query": mostly(draw, ["密钥轮换", "重放攻击", "如何轮换密钥", "钥", "key rotation"], queries, 3),
                  "Limit": mostly(draw, [None, 1, 3, 5], limits, 3)}
        drop = draw(st.sets(st.sampled_from(list(fields)), max_size=2)) if draw(chance(6)) else set()
        obj = {k: v for k, v in fields.items() if k not in drop}
        if draw(chance(4)):
            obj.update(draw(st.dictionaries(st.text(max_size=10), json_values, max_size=2)))
        raw = json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, None, 1]))).encode()
    elif kind == "json":
        raw = json.dumps(draw(json_values)).encode()
    elif kind == "bytes":
        raw = draw(st.binary(max_size=300))
    elif kind == "text":
        raw = draw(st.text(max_size=200)).encode("utf-8", "surrogatepass")
    elif kind == "huge":
        raw = b'{"Query":"' + b"x" * draw(st.integers(MAX_BODY - 20, 3 * MAX_BODY)) + b'"}'
    else:
        raw = b""
    if draw(chance(10)):
        raw = b"\xef\xbb\xbf" + raw  # a UTF-8 BOM
    return raw


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    declared: int  # Content-Length sent (may exceed len(body): a stalled upload)

    def wire(self) -> bytes:
        head = f"{self.method} {self.path} HTTP/1.1\r\n".encode("latin-1") + b"Host: fuzz\r\nConnection: close\r\n"
        for k, v in self.headers:
            head += k + b": " + v + b"\r\n"
        return head + f"Content-Length: {self.declared}\r\n\r\n".encode() + self.body


@st.composite
def requests(draw: st.DrawFn) -> Request:
    path = str(mostly(draw, CALLBACK_PATHS, st.sampled_from(OTHER_PATHS), 8))
    method = str(mostly(draw, ["POST"], st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "OPTIONS"]), 8))
    body = draw(bodies())
    now = int(time.time())
    ts = str(mostly(draw, [str(now)], st.sampled_from([str(now - 3601), str(now + 3601), str(now - 3599), "0" * 10,
                                                        "12345", "１７００００００００", ""]) | latin1_text))
    nonce = str(mostly(draw, ["fresh"], st.sampled_from(["abc", "x" * 33, "", "Ab_12345", "重放随机串"]) | latin1_text))
    if nonce == "fresh":
        nonce = f"fz{next(_nonces):010d}{os.getpid() % 10000:04d}"
    signature = str(mostly(draw, ["valid"], st.sampled_from(["upper", "0" * 64, "zz", ""]) | latin1_text))
    if signature in ("valid", "upper"):
        # HMAC over the header bytes as sent (the server checks formats first, so for a
        # non-ASCII timestamp or nonce this is as valid as a signature can be).
        sig = hmac.new(SECRET.encode(), _latin1(ts) + _latin1(nonce) + body, hashlib.sha256).hexdigest()
        signature = sig.upper() if signature == "upper" else sig
    headers: list[tuple[bytes, bytes]] = []
    for name, value in ((b"X-Content-Timestamp", ts), (b"X-Content-Nonce", nonce), (b"X-Content-Signature", signature)):
        times = draw(st.sampled_from([1] * 12 + [0, 2]))
        headers += [(name, _latin1(value))] * times
    ctype = mostly(draw, ["application/json"], st.sampled_from([None, "application/json; charset=utf-8",
                                                               "application/json; charset=latin-1", "text/json",
                                                               "text/plain", "multipart/form-data; boundary=x"])
                   | latin1_text, 8)
    if ctype is not None:
        headers.append((b"Content-Type", _latin1(str(ctype))))
    enc = draw(st.sampled_from([None] * 20 + ["gzip", "identity", "br, gzip"]))
    if enc is not None:
        headers.append((b"Content-Encoding", enc.encode()))
    for name, value in draw(st.lists(st.tuples(st.sampled_from([b"X-Request-Id", b"Authorization", b"Accept",
                                                                b"X-Fuzz", b"Expect", b"Cookie"]),
                                               control_text), max_size=2)):
        headers.append((name, _latin1(value)))
    stall = draw(chance(25))  # rare: each one costs the body timeout
    declared = len(body) + (draw(st.integers(1, 50)) if stall else 0)
    return Request(method, path, tuple(headers), body, declared)


def _latin1(s: str) -> bytes:
    return s.encode("latin-1", "replace")


# ------------------------------------------------------------------ the oracle


def exchange(port: int, req: Request) -> tuple[bytes, float]:
    """Send `req` on a new connection; (everything received until the server closes, seconds)."""
    t0 = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=BODY_TIMEOUT + SLACK + 5) as s:
        try:
            s.sendall(req.wire())
        except OSError:  # the server may answer and close before reading an oversized body
            pass
        out = b""
        while True:
            try:
                part = s.recv(65536)
            except ConnectionResetError:
                break
            if not part:
                break
            out += part
    return out, time.monotonic() - t0


def check(req: Request, raw: bytes, took: float) -> None:
    assert took < BODY_TIMEOUT + SLACK, f"{took:.2f} s for {req!r}"
    assert raw, f"closed without an answer: {req!r}"
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0]
    status = int(status_line.split(b" ")[1])
    assert status != 500 and status < 500 or status == 503, (status, raw[:300], req)
    if body == b"" and status in SERVER_BARE:
        return  # the HTTP server's own documented answer
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in head.split(b"\r\n")[1:])}
    if (status, body) in PLAIN and not req.path.startswith("/volcengine/"):
        return  # a path or method no endpoint serves (docs/operators.md, "Other paths")
    assert headers.get(b"content-type", b"").startswith(b"application/json"), (status, raw[:300], req)
    doc = orjson.loads(body)
    if req.path.startswith("/volcengine/") and req.path.count("/") == 2:
        assert set(doc) == {"Ret", "Msg", "Result"}, doc
        assert RET_STATUS.get(doc["Ret"]) == status, (doc, status, req)
        assert doc["Ret"] != 50001, (doc, req)
        assert isinstance(doc["Msg"], str) and doc["Msg"]
        assert isinstance(doc["Result"], list) and (doc["Ret"] == 0 or doc["Result"] == [])
        assert SECRET not in body.decode("utf-8", "replace")
    else:
        assert isinstance(doc, dict)


@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(req=requests())
def test_any_request_gets_a_documented_answer_in_bounded_time(server: tuple[Server, int], req: Request) -> None:
    _, port = server
    raw, took = exchange(port, req)
    check(req, raw, took)


def test_the_oracle_rejects_what_it_must(tmp_path: Path) -> None:
    # The checks can fail: a 500, an unknown Ret, a Ret with the wrong status, a hang.
    req = Request("POST", "/volcengine/acme", (), b"{}", 2)
    envelope = b'HTTP/1.1 %d X\r\ncontent-type: application/json\r\n\r\n{"Ret":%d,"Msg":"m","Result":[]}'
    for raw, took in ((envelope % (500, 50001), 0.1), (envelope % (400, 12345), 0.1), (envelope % (409, 40001), 0.1),
                      (envelope % (400, 40001), BODY_TIMEOUT + SLACK + 1), (b"", 0.1),
                      (b"HTTP/1.1 400 X\r\ncontent-type: text/html\r\n\r\n<h1>no</h1>", 0.1)):
        with pytest.raises((AssertionError, orjson.JSONDecodeError)):
            check(req, raw, took)
    check(req, envelope % (400, 40001), 0.1)
    check(req, b"HTTP/1.1 431 \r\ncontent-length: 0\r\n\r\n", 0.1)
