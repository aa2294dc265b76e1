"""Report mode (the 联网问答Agent callback spec "接入流程" 3-4): the console's 测试 arrives
before the key is shown. Report answers it and records the outcome; enforce rejects it.
Format and replay checks stay on in both modes.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import orjson
import pytest

from gateway.volcengine.signing import sign_headers
from tests.support.callbacks import assert_rejected, body_of, callback_config
from tests.support.configs import NOW
from tests.support.configs import SECRET_ACME as SECRET_NEW
from tests.support.paths import ROOT

Factory = Callable[..., Any]


async def last(app: Any) -> SimpleNamespace:
    """The newest delivery record of tenant acme, as kept by the deliveries record."""
    await app.deliveries.flush()
    rec = (await app.deliveries.recent("acme", 1))[0]
    return SimpleNamespace(**{**rec, "keys_tried": tuple(rec.get("keys_tried", ()))})


async def _post(c: httpx.AsyncClient, headers: dict[str, str], body: bytes | None = None) -> httpx.Response:
    return await c.post("/volcengine/acme", content=body or body_of(), headers=headers)


@pytest.mark.anyio
async def test_report_answers_unsigned_and_records_it(gateway: Factory) -> None:
    c, app = await gateway("report")
    r = await _post(c, {"Content-Type": "application/json"})
    assert r.status_code == 200
    env = orjson.loads(r.content)
    assert env["Ret"] == 0 and env["Result"][0]["Id"] == "kb-1"
    d = await last(app)
    assert (d.signature, d.signature_reason, d.key_id) == ("unsigned", "header_missing", None)
    assert (d.first_level_id, d.second_level_id) == ("tech", "software")
    assert d.request_id == r.headers["x-request-id"]


@pytest.mark.anyio
async def test_enforce_rejects_unsigned(gateway: Factory) -> None:
    c, app = await gateway("enforce")
    r = await _post(c, {"Content-Type": "application/json"})
    assert_rejected(r, "header_missing")
    assert (await last(app)).outcome == "header_missing"


@pytest.mark.anyio
async def test_report_answers_wrong_key_and_records_keys_tried_and_skew(gateway: Factory) -> None:
    c, app = await gateway("report")
    r = await _post(c, sign_headers("not-the-key", body_of(), NOW - 42))
    assert r.status_code == 200 and orjson.loads(r.content)["Ret"] == 0
    d = await last(app)
    assert (d.signature, d.signature_reason) == ("failed", "signature_mismatch")
    assert d.keys_tried == ("acme-2026-10", "acme-2026-11")
    assert d.skew_seconds == 42
    assert d.key_id is None


@pytest.mark.anyio
async def test_report_records_the_key_that_verified(gateway: Factory) -> None:
    c, app = await gateway("report")
    r = await _post(c, sign_headers(SECRET_NEW, body_of(), NOW))
    assert r.status_code == 200
    d = await last(app)
    assert (d.signature, d.key_id, d.signature_reason) == ("verified", "acme-2026-11", None)


@pytest.mark.anyio
async def test_report_answers_expired_timestamp_and_records_it(gateway: Factory) -> None:
    c, app = await gateway("report")
    r = await _post(c, sign_headers(SECRET_NEW, body_of(), NOW - 3601))
    assert r.status_code == 200
    d = await last(app)
    assert (d.signature, d.signature_reason, d.skew_seconds) == ("failed", "timestamp_expired", 3601)


@pytest.mark.anyio
async def test_report_without_signature_header_still_claims_the_nonce(gateway: Factory) -> None:
    c, _ = await gateway("report")
    h = {"Content-Type": "application/json", "X-Content-Timestamp": str(NOW), "X-Content-Nonce": "onceonly1"}
    assert (await _post(c, h)).status_code == 200
    assert_rejected(await _post(c, h), "replayed")


@pytest.mark.anyio
async def test_report_still_rejects_a_replayed_failing_signature(gateway: Factory) -> None:
    c, _ = await gateway("report")
    h = sign_headers("not-the-key", body_of(), NOW, "fixednonce1")
    assert (await _post(c, h)).status_code == 200
    assert_rejected(await _post(c, h), "replayed")


@pytest.mark.anyio
@pytest.mark.parametrize(("header", "value", "reason"), [
    ("X-Content-Nonce", "bad!", "nonce_invalid"),
    ("X-Content-Timestamp", "12345", "timestamp_invalid"),
    ("X-Content-Signature", "zz", "signature_invalid"),
])
async def test_report_still_checks_formats(gateway: Factory, header: str, value: str, reason: str) -> None:
    c, _ = await gateway("report")
    h = sign_headers(SECRET_NEW, body_of(), NOW)
    h[header] = value
    assert_rejected(await _post(c, h), reason)


@pytest.mark.anyio
async def test_report_checks_a_lone_malformed_nonce(gateway: Factory) -> None:
    c, _ = await gateway("report")
    assert_rejected(await _post(c, {"Content-Type": "application/json", "X-Content-Nonce": "ab"}), "nonce_invalid")


def test_check_config_warns_about_report_mode(tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.toml"
    end = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cfg.write_text(f'[tenants.acme]\nverify = "report"\nreport_until = {end}\n'
                   '[tenants.gone]\nverify = "report"\nreport_until = 2001-01-01T00:00:00Z\n'
                   '[tenants.beta]\nverify = "enforce"\n'
                   '[[tenants.beta.secrets]]\nid = "k"\nvalue_env = "BETA_KEY"\n')
    out = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)], cwd=ROOT,
                         capture_output=True, text=True, env={"BETA_KEY": "x" * 16, "PATH": "/usr/bin"})
    assert f"verify=report until {end} (2 h left)" in out.stdout or f"verify=report until {end} (119 min left)" \
        in out.stdout, out
    assert "WARNING: tenant acme is in report mode" in out.stdout, out
    # a report mode past its end enforces, and says so
    assert "tenant gone: POST /volcengine/gone  verify=report ended 2001-01-01T00:00:00Z: enforcing" in out.stdout
    assert "tenant gone is in report mode" not in out.stdout
    assert "tenant beta is in report mode" not in out.stdout


def test_check_config_refuses_report_mode_without_an_end(tmp_path: Path) -> None:
    cfg = tmp_path / "gateway.toml"
    cfg.write_text('[tenants.acme]\nverify = "report"\n')
    out = subprocess.run([sys.executable, "-m", "gateway.cli", "check-config", "--config", str(cfg)], cwd=ROOT,
                         capture_output=True, text=True, env={"PATH": "/usr/bin"})
    assert out.returncode == 2
    assert "Config 'tenants.acme.report_until' is missing" in out.stderr, out


@pytest.mark.anyio
async def test_report_mode_past_its_end_enforces(start_app: Factory, docs_index: Path, redis_url: str,
                                                 key_prefix: str) -> None:
    # Nobody edits the file: the clock passing report_until alone closes the tenant.
    end = dt.datetime.fromtimestamp(NOW + 60, dt.UTC)
    c, app, clock = await start_app(callback_config(docs_index, verify="report", report_until=end, now=NOW,
                                                    replay={"redis_url": redis_url, "key_prefix": key_prefix}))
    zeros = {"Content-Type": "application/json", "X-Content-Timestamp": str(NOW + 59),
             "X-Content-Nonce": "allzero1", "X-Content-Signature": "0" * 64}
    clock.t = NOW + 59
    assert orjson.loads((await _post(c, zeros)).content)["Ret"] == 0  # still report: answered, recorded
    clock.t = NOW + 60
    assert_rejected(await _post(c, {**zeros, "X-Content-Nonce": "allzero2"}), "signature_mismatch")
    assert_rejected(await _post(c, {"Content-Type": "application/json"}), "header_missing")
    ready = await c.get("/readyz")
    assert ready.json()["tenants"] == [{"tenant": "acme", "verify": "report", "mode": "enforce",
                                        "report_until": end.strftime("%Y-%m-%dT%H:%M:%SZ")}]
    assert (await last(app)).outcome == "header_missing"
