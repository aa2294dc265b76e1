"""gateway.serve.coalesce: a sized response leaves in one write, the same bytes as before;
a streamed one's head leaves at once. hypercorn's own HTTP/1.1 protocol class and a real h11
connection; then a real `kbgate serve` answering over a socket."""

from __future__ import annotations

from typing import Any

import h11
import pytest
from hypercorn.events import RawData
from hypercorn.protocol.h11 import H11Protocol

from gateway.serve.coalesce import install, installed

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _protocol(request: bytes) -> tuple[Any, list[bytes]]:
    """An H11Protocol (as hypercorn's worker builds it, but only the parts writing uses) whose
    connection has read `request`; the list collects what it hands the socket writer."""
    sent: list[bytes] = []

    async def send(event: object) -> None:
        assert isinstance(event, RawData)
        sent.append(event.data)

    proto: Any = H11Protocol.__new__(H11Protocol)
    proto.connection = h11.Connection(h11.SERVER)
    proto.connection.receive_data(request)
    while proto.connection.next_event() not in (h11.NEED_DATA, h11.PAUSED):
        pass
    proto.send = send
    return proto, sent


POST = b"POST /volcengine/acme HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"


async def _respond(proto: Any, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> None:
    await proto._send_h11_event(h11.Response(status_code=200, headers=headers))
    for c in chunks:
        await proto._send_h11_event(h11.Data(data=c))
    await proto._send_h11_event(h11.EndOfMessage())


async def test_a_sized_response_leaves_in_one_write_with_the_same_bytes() -> None:
    install()
    assert installed()
    body = b'{"Ret":0,"Msg":"success","Result":[]}'
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    proto, sent = _protocol(POST)
    await _respond(proto, headers, [body])
    reference = h11.Connection(h11.SERVER)  # what the unchanged protocol writes, event by event
    reference.receive_data(POST)
    while reference.next_event() not in (h11.NEED_DATA, h11.PAUSED):
        pass
    wire = b"".join(reference.send(e) or b"" for e in (h11.Response(status_code=200, headers=headers),
                                                       h11.Data(data=body), h11.EndOfMessage()))
    assert sent == [wire]
    assert wire.startswith(b"HTTP/1.1 200 ") and wire.endswith(body)


async def test_a_body_less_sized_response_still_sends_its_head() -> None:
    install()
    proto, sent = _protocol(POST)
    await _respond(proto, [(b"content-length", b"0")], [])
    assert len(sent) == 1 and sent[0].startswith(b"HTTP/1.1 200 ") and sent[0].endswith(b"\r\n\r\n")


async def test_a_streamed_response_sends_its_head_at_once() -> None:
    install()
    proto, sent = _protocol(POST)
    await proto._send_h11_event(h11.Response(status_code=200, headers=[(b"content-type", b"text/event-stream")]))
    assert len(sent) == 1 and sent[0].startswith(b"HTTP/1.1 200 ")  # before any event: a client sees it
    await proto._send_h11_event(h11.Data(data=b"data: 1\n\n"))
    await proto._send_h11_event(h11.EndOfMessage())
    assert b"".join(sent).endswith(b"0\r\n\r\n") and len(sent) == 3  # chunked, each part as it comes
