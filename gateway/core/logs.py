"""Structured JSON logs: one line per event, one line per callback.

Secrets never reach a log line: config objects hold them as `Secret` (repr masked) and
no code path logs a header value or a body. Query text is logged at debug level only.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import orjson

_STD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys()) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """Formats a record as one compact JSON object: ts, level, logger, msg and extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in record.__dict__.items():
            if k not in _STD and not k.startswith("_"):
                out[k] = v
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str).decode()


def setup_logging(level: str = "info", stream: Any = None) -> None:
    """Route the 'kbgate' loggers to `stream` (stderr) as JSON lines at `level`."""
    root = logging.getLogger("kbgate")
    root.handlers.clear()
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level.upper())
    root.propagate = False
