"""One socket write per fixed-size HTTP/1.1 response, in kbgate's hypercorn workers.

Rationale: docs/design-notes.md, "gateway/serve/coalesce.py".
"""

from __future__ import annotations

from typing import Any

import h11
from hypercorn.events import RawData
from hypercorn.protocol import h11 as hypercorn_h11

__all__ = ["install", "installed"]

_MARK = "_kbgate_one_write"


def _sized(headers: Any) -> bool:
    return any(name == b"content-length" for name, _ in headers)


async def _send_h11_event(self: Any, event: Any) -> None:
    """H11Protocol._send_h11_event (hypercorn 0.18), holding a sized response's head (module doc)."""
    try:
        data = self.connection.send(event)
    except h11.LocalProtocolError:
        if self.connection.their_state != h11.ERROR:
            raise
        return
    held: bytes | None = getattr(self, _MARK, None)
    if isinstance(event, h11.Response) and _sized(event.headers):
        setattr(self, _MARK, (held or b"") + data)
        return
    if held is not None:
        setattr(self, _MARK, None)
        data = held + (data or b"")
    if data:
        await self.send(RawData(data=data))


def install() -> None:
    """Make hypercorn's HTTP/1.1 protocol write a sized response in one write (idempotent)."""
    cls = hypercorn_h11.H11Protocol
    if installed():
        return
    setattr(cls, _MARK, None)
    cls._send_h11_event = _send_h11_event  # type: ignore[method-assign]


def installed() -> bool:
    """True once `install()` ran in this process."""
    return hasattr(hypercorn_h11.H11Protocol, _MARK)
