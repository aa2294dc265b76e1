"""gateway/volcengine/signing.py: formats, tolerance, HMAC over raw bytes, rotation (callback spec, 签名校验)."""

from __future__ import annotations

import json

import orjson
import pytest

from gateway.core.config import SecretKey
from gateway.core.errors import MalformedRequest, VerificationFailed
from gateway.core.types import Secret
from gateway.volcengine.signing import (
    SigningHeaders,
    check_formats,
    check_tolerance,
    compute_signature,
    match_key,
    sign_headers,
    signing_headers,
)
from tests.support.paths import FIXTURES

SEED_EXAMPLE_BODY = {"FirstLevelId": "tech", "SecondLevelId": "software", "Query": "寻找相关软件信息", "Limit": 5}


def _cases() -> list[dict[str, str]]:
    cases: list[dict[str, str]] = json.loads((FIXTURES / "signatures.json").read_text("utf-8"))["cases"]
    return cases


def _key(value: str, kid: str = "k1", not_after: float | None = None) -> SecretKey:
    return SecretKey(kid, Secret(value), not_after)


def test_known_answer_vectors() -> None:
    cases = _cases()
    assert len(cases) >= 6
    for case in cases:
        body = case["body"].encode("utf-8")
        got = compute_signature(case["secret"], case["timestamp"], case["nonce"], body)
        assert got == case["signature"], case["name"]
        assert match_key([_key(case["secret"])], case["timestamp"], case["nonce"], case["signature"], body,
                         now=float(case["timestamp"])) == "k1"


def test_reserialized_body_does_not_verify() -> None:
    for case in _cases():
        body = case["body"].encode("utf-8")
        redumped = orjson.dumps(json.loads(case["body"]))
        if redumped == body:
            continue
        with pytest.raises(VerificationFailed) as exc:
            match_key([_key(case["secret"])], case["timestamp"], case["nonce"], case["signature"], redumped,
                      now=float(case["timestamp"]))
        assert exc.value.code == "signature_mismatch"


def test_each_vector_verifies_only_its_own_body() -> None:
    cases = _cases()
    for a in cases:
        for b in cases:
            if a["body"] == b["body"]:
                continue
            with pytest.raises(VerificationFailed):
                match_key([_key(a["secret"])], a["timestamp"], a["nonce"], a["signature"], b["body"].encode(),
                          now=float(a["timestamp"]))


def test_sign_headers_roundtrip_and_lowercase_hex() -> None:
    body = orjson.dumps(SEED_EXAMPLE_BODY)
    h = sign_headers("s3cret", body, 1690366367, "kfcv50")
    assert h["X-Content-Timestamp"] == "1690366367"
    assert h["X-Content-Signature"] == h["X-Content-Signature"].lower()
    assert len(h["X-Content-Signature"]) == 64
    assert match_key([_key("s3cret")], "1690366367", "kfcv50", h["X-Content-Signature"], body, 1690366367.0) == "k1"


def _hdrs(ts: str | None = "1700000000", nonce: str | None = "AbC123xyz", sig: str | None = "a" * 64) -> SigningHeaders:
    return SigningHeaders(ts, nonce, sig)


@pytest.mark.parametrize("missing", ["timestamp", "nonce", "signature"])
def test_missing_header(missing: str) -> None:
    kw = {"ts": "1700000000", "nonce": "AbC123xyz", "sig": "a" * 64}
    kw[{"timestamp": "ts", "nonce": "nonce", "signature": "sig"}[missing]] = None
    with pytest.raises(MalformedRequest) as exc:
        check_formats(_hdrs(**kw))
    assert exc.value.code == "header_missing"
    assert missing.capitalize() in exc.value.message


def test_repeated_header_rejected() -> None:
    raw = [(b"x-content-nonce", b"abcdef"), (b"X-Content-Nonce", b"abcdeg")]
    with pytest.raises(MalformedRequest) as exc:
        signing_headers(raw)
    assert exc.value.code == "header_repeated"


@pytest.mark.parametrize("ts", ["170000000", "17000000000", "+700000000", " 1700000000", "１７００００００００",
                                "170000000a", "", "1.70000000"])
def test_timestamp_format(ts: str) -> None:
    with pytest.raises(VerificationFailed) as exc:
        check_formats(_hdrs(ts=ts))
    assert exc.value.code == "timestamp_invalid"


@pytest.mark.parametrize("nonce", ["abc12", "a" * 33, "abc-123", "abc 123", "ａｂｃ１２３", "abcdé1", ""])
def test_nonce_format(nonce: str) -> None:
    with pytest.raises(VerificationFailed) as exc:
        check_formats(_hdrs(nonce=nonce))
    assert exc.value.code == "nonce_invalid"


@pytest.mark.parametrize("nonce", ["abc123", "A" * 32, "AbCdEf"])
def test_nonce_format_accepts_bounds(nonce: str) -> None:
    assert check_formats(_hdrs(nonce=nonce))[1] == nonce


@pytest.mark.parametrize("sig", ["a" * 63, "a" * 65, "g" * 64, "", "a" * 62 + "\u00e9", "０" * 64])
def test_signature_format(sig: str) -> None:
    with pytest.raises(VerificationFailed) as exc:
        check_formats(_hdrs(sig=sig))
    assert exc.value.code == "signature_invalid"


@pytest.mark.parametrize("delta", [-3600, 3600, 0])
def test_tolerance_inside(delta: int) -> None:
    now = 1_700_000_000
    assert check_tolerance(str(now + delta), float(now), 3600) == now + delta


@pytest.mark.parametrize("delta", [-3601, 3601])
def test_tolerance_outside_both_directions(delta: int) -> None:
    now = 1_700_000_000
    with pytest.raises(VerificationFailed) as exc:
        check_tolerance(str(now + delta), float(now), 3600)
    assert exc.value.code == "timestamp_expired"


def test_tolerance_configurable_lower() -> None:
    now = 1_700_000_000
    assert check_tolerance(str(now - 300), float(now), 300) == now - 300
    with pytest.raises(VerificationFailed):
        check_tolerance(str(now - 301), float(now), 300)


def test_signature_mismatch() -> None:
    body = b'{"Query":"x"}'
    sig = compute_signature("right", "1700000000", "abcdef", body)
    with pytest.raises(VerificationFailed) as exc:
        match_key([_key("wrong")], "1700000000", "abcdef", sig, body, 1700000000.0)
    assert exc.value.code == "signature_mismatch"


def test_uppercase_hex_is_same_digest() -> None:
    body = b"{}"
    sig = compute_signature("k", "1700000000", "abcdef", body).upper()
    assert match_key([_key("k")], "1700000000", "abcdef", sig, body, 1700000000.0) == "k1"


def test_rotation_two_keys_both_verify_and_name_key_id() -> None:
    body = orjson.dumps(SEED_EXAMPLE_BODY)
    keys = [_key("old-secret", "2026-10"), _key("new-secret", "2026-11")]
    for value, kid in [("old-secret", "2026-10"), ("new-secret", "2026-11")]:
        sig = compute_signature(value, "1700000000", "abcdef", body)
        assert match_key(keys, "1700000000", "abcdef", sig, body, 1700000000.0) == kid


def test_expired_key_no_longer_verifies() -> None:
    body = b"{}"
    keys = [_key("old", "old", not_after=1699999999.0), _key("new", "new")]
    sig = compute_signature("old", "1700000000", "abcdef", body)
    with pytest.raises(VerificationFailed) as exc:
        match_key(keys, "1700000000", "abcdef", sig, body, 1700000000.0)
    assert exc.value.code == "signature_mismatch"
    with pytest.raises(VerificationFailed) as exc:
        match_key(keys[:1], "1700000000", "abcdef", sig, body, 1700000000.0)
    assert exc.value.code == "no_live_key"


def test_secret_repr_is_masked() -> None:
    k = _key("super-secret-value")
    assert "super-secret-value" not in repr(k)
    assert "super-secret-value" not in str(k.value)
