"""Volcengine callbacks as the console sends them: a compact JSON Body, signed over its bytes."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path
from typing import Any

import httpx
import orjson

from gateway.core.config import Config
from gateway.core.errors import RET_BY_REASON
from gateway.volcengine.signing import sign_headers
from tests.support.configs import ACME_KEYS, REPORT_UNTIL, SECRETS, config, parse, tenant


def body(first: str = "tech", second: str = "software", query: str = "密钥轮换", limit: int = 3) -> bytes:
    """A compact Body with the 联网问答Agent callback spec field names."""
    return orjson.dumps({"FirstLevelId": first, "SecondLevelId": second, "Query": query, "Limit": limit})


def body_of(**over: Any) -> bytes:
    """A Body whose fields `over` replaces; a field given as `...` is left out."""
    b: dict[str, Any] = {"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "密钥轮换", "Limit": 3}
    b.update(over)
    return orjson.dumps({k: v for k, v in b.items() if v is not ...})


def signed(secret: str | None, raw: bytes, ts: int | None = None, nonce: str | None = None) -> dict[str, str]:
    """The headers for `raw`: signed with `secret` at `ts` (now), or only the content type when None."""
    if secret is None:
        return {"content-type": "application/json"}
    h = sign_headers(secret, raw, int(time.time()) if ts is None else ts, nonce)
    h["content-type"] = h.pop("Content-Type")
    return h


def post(client: httpx.Client, base: str, secret: str | None, *, tenant: str = "acme", **fields: Any) -> httpx.Response:
    """POST one callback to `tenant`, signed with `secret` now (unsigned when None)."""
    raw = body(**fields)
    return client.post(f"{base}/volcengine/{tenant}", content=raw, headers=signed(secret, raw))


def answered(client: httpx.Client, base: str, secret: str, **fields: Any) -> dict[str, Any]:
    """The parsed answer of one callback (`post`'s arguments), asserted to be HTTP 200."""
    r = post(client, base, secret, **fields)
    assert r.status_code == 200, r.text
    got: dict[str, Any] = orjson.loads(r.content)
    return got


def result_ids(got: dict[str, Any]) -> list[str]:
    """The `Id` of each Result item of a callback answer, in order."""
    return [item["Id"] for item in got["Result"]]


def ret(r: httpx.Response) -> int:
    """The Ret of a callback answer."""
    return int(orjson.loads(r.content)["Ret"])




def callback_config(indexes: Path, *, verify: str = "enforce", tolerance: int = 3600,
                    replay: dict[str, Any] | None = None, report_until: dt.datetime = REPORT_UNTIL,
                    now: float | None = None, **search: Any) -> Config:
    """Tenant acme (its two keys) with three routes: tech/software and 1/2 → kb, tech/missing →
    an absent index; a 4 KiB body cap; search limits of 10 (default 3) and 100-character queries.
    report_until: the end of verify = "report"; now: the instant the config is loaded at
    (unix s; None: the real clock)."""
    routes = [("tech", "software", "kb"), ("1", "2", "kb"), ("tech", "missing", "absent")]
    acme = tenant("acme", verify=verify, keys=ACME_KEYS, routes=routes, report_until=report_until)
    data = config(indexes.parent, tenants=[acme],
                  indexes=indexes, server={"max_body_bytes": 4096},
                  replay={"tolerance_seconds": tolerance, **(replay or {})},
                  search={"max_limit": 10, "default_limit": 3, "max_query_chars": 100, **search})
    return parse(data, indexes.parent, now=now)


def assert_rejected(r: httpx.Response, reason: str) -> dict[str, Any]:
    """A refused callback: the status and Ret of `reason`, an empty Result, a Msg, no secret."""
    row = RET_BY_REASON[reason]
    env = orjson.loads(r.content)
    assert r.status_code == row.status, (r.status_code, env)
    assert env["Ret"] == row.ret, env
    assert env["Result"] == []
    assert isinstance(env["Msg"], str) and env["Msg"]
    assert not [s for s in SECRETS if s in r.text]
    return env
