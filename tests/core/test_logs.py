"""Logs never hold a secret, and hold the query text only at debug level.

Rationale: docs/design-notes.md, "tests/core/test_logs.py".
"""

from __future__ import annotations

import asyncio
import io
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from asgi_lifespan import LifespanManager

from gateway.core.config import load_config
from gateway.core.logs import setup_logging
from gateway.serve.app import create_app
from tests.support.callbacks import body, signed
from tests.support.configs import ADMIN_TOKEN, ENV, SECRET_ACME, SECRET_ACME_OLD, SECRET_BETA, SECRETS, two_tenants
from tests.support.console import login
from tests.support.harness import serve

QUERY = "如何轮换密钥"


def lines(text: str) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in text.splitlines() if line.startswith("{")]


@pytest.fixture(name="captured")
def _captured() -> Iterator[io.StringIO]:
    buf = io.StringIO()
    yield buf
    logging.getLogger("kbgate").handlers.clear()


async def exercise(c: httpx.AsyncClient) -> list[str]:
    """Send one of everything; returns the request ids of the callbacks."""
    ids = []
    for tenant, secret, first, second in (
        ("acme", SECRET_ACME, "tech", "software"),  # success, current key
        ("acme", SECRET_ACME_OLD, "tech", "software"),  # success, old key
        ("acme", "not-a-key", "tech", "software"),  # signature failure (enforce)
        ("beta", "not-a-key", "产品", "文档"),  # report mode: bad signature answered
        ("beta", None, "产品", "文档"),  # report mode: unsigned answered
        ("acme", None, "tech", "software"),  # enforce: unsigned rejected
    ):
        raw = body(first=first, second=second, query=QUERY)
        headers = signed(secret, raw) if secret else {"content-type": "application/json"}
        r = await c.post(f"/volcengine/{tenant}", content=raw, headers=headers)
        ids.append(r.headers["x-request-id"])
    await login(c, token="wrong-" + ADMIN_TOKEN)
    await login(c)
    await c.get("/admin/", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
    await c.get("/metrics")
    return ids


@pytest.mark.anyio
@pytest.mark.parametrize("level", ["info", "debug"])
async def test_in_process_logs_no_secret_query_only_at_debug(tmp_path: Path, docs_index: Path, captured: io.StringIO,
                                                              monkeypatch: pytest.MonkeyPatch, level: str) -> None:
    for k, v in ENV.items():
        monkeypatch.setenv(k, v)
    cfg = load_config(two_tenants(tmp_path, docs_index, log_level=level))
    setup_logging(cfg.log_level, captured)
    app = create_app(cfg)
    async with LifespanManager(app) as m:  # type: ignore[arg-type]
        c = httpx.AsyncClient(transport=httpx.ASGITransport(app=m.app), base_url="http://kbgate")
        ids = await exercise(c)
    text = captured.getvalue()
    assert not [s for s in SECRETS if s in text]
    records = lines(text)
    per_request = {r["request_id"]: r for r in records if r["msg"] == "callback"}
    assert set(per_request) == set(ids)  # one line per callback, with its request id
    for r in per_request.values():
        assert {"tenant", "outcome", "ret", "latency_ms", "status"} <= set(r)
        assert "query" not in r
    assert [per_request[i]["outcome"] for i in ids] == ["ok", "ok", "signature_mismatch", "ok", "ok",
                                                       "header_missing"]
    query_lines = [r for r in records if QUERY in orjson.dumps(r).decode()]
    if level == "info":
        assert query_lines == []
    else:
        assert query_lines and all(r["level"] == "debug" and r["msg"] == "callback query" for r in query_lines)


def test_real_server_logs_have_no_secret(tmp_path: Path, docs_index: Path, redis_url: str, key_prefix: str) -> None:
    cfg = two_tenants(tmp_path, docs_index, redis_url=redis_url, key_prefix=key_prefix)
    with serve(cfg, env=ENV) as srv:
        async def run() -> list[str]:
            async with httpx.AsyncClient(base_url=srv.url, timeout=10) as c:
                r = await c.post("/volcengine/acme", content=body(), headers={
                    **signed(SECRET_ACME, body()), "x-request-id": "caller-trace-7"})
                assert r.headers["x-request-id"] == "caller-trace-7"
                bad = await c.post("/volcengine/acme", content=body(), headers={
                    **signed(SECRET_ACME, body()), "x-request-id": "bad id with spaces"})
                assert bad.headers["x-request-id"] != "bad id with spaces"
                return await exercise(c)

        ids = asyncio.run(run())
    text = srv.logs()
    assert not [s for s in SECRETS if s in text], "a secret reached the server log"
    assert QUERY not in text  # info level: query text never logged
    assert "report mode" in text  # the start-up warning for tenant beta
    logged = {r.get("request_id") for r in lines(text) if r.get("msg") == "callback"}
    assert {"caller-trace-7", *ids} <= logged


def _check_config(tmp_path: Path, toml: str, env: dict[str, str], files: dict[str, str] | None = None
                  ) -> subprocess.CompletedProcess[str]:
    for name, content in (files or {}).items():
        (tmp_path / name).write_text(content, encoding="utf-8")
    cfg = tmp_path / "bad.toml"
    cfg.write_text(toml, encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)],
                          capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env}, timeout=30)


TENANT = '[tenants.acme]\npath = "/volcengine/acme"\n[[tenants.acme.secrets]]\nid = "k1"\n'


@pytest.mark.parametrize(("case", "toml", "env", "files", "names"), [
    ("whitespace in env secret", TENANT + 'value_env = "S"\n', {"S": f"{SECRET_ACME} tail"}, None,
     "tenants.acme.secrets[0].value_env"),
    ("whitespace in file secret", TENANT + 'value_file = "s.txt"\n', {}, {"s.txt": f"{SECRET_BETA}\n\nx"},
     "tenants.acme.secrets[0].value_file"),
    ("secret inline by mistake", TENANT + f'value = "{SECRET_ACME}"\n', {}, None, "tenants.acme.secrets[0].value"),
    ("secret unquoted breaks TOML", TENANT + f"value_env = {SECRET_ACME}\n", {}, None, "<file>"),
    ("admin token instead of digest", f'[admin]\ntoken_sha256 = "{ADMIN_TOKEN}"\n', {}, None,
     "admin.token_sha256"),
    ("secret pasted as key id", f'[tenants.acme]\n[[tenants.acme.secrets]]\nid = "{SECRET_ACME} "\n'
     'value_env = "S"\n', {"S": "x"}, None, "tenants.acme.secrets[0].id"),
])
def test_cli_config_errors_never_print_a_secret(tmp_path: Path, case: str, toml: str, env: dict[str, str],
                                                files: dict[str, str] | None, names: str) -> None:
    done = _check_config(tmp_path, toml, env, files)
    out = done.stdout + done.stderr
    assert done.returncode == 2, (case, out)
    named = f"Config file '{tmp_path / 'bad.toml'}'" if names == "<file>" else f"Config '{names}'"
    assert named in out, (case, out)  # the key (the file for a TOML error) is named...
    assert not [s for s in SECRETS if s in out], (case, out)  # ...the value never
