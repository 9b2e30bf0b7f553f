"""portal.lib.security.hooks: signatures (checked against openssl), verification, the pinned POST."""

from __future__ import annotations

import subprocess
import time

import pytest

from portal.lib.security import hooks
from tests.hooks.conftest import CallbackReceiver

SECRET = "whsec_test-secret"
BODY = b'{"overrides":{"users":2},"idempotency_key":"k"}'


def test_the_signature_is_what_openssl_computes_as_documented():
    ts = 1_700_000_000
    message = f"{ts}.".encode() + BODY
    out = subprocess.run(
        ["openssl", "dgst", "-sha256", "-hmac", SECRET], input=message, capture_output=True, check=True
    ).stdout.decode()
    assert hooks.signature(SECRET, ts, BODY) == "sha256=" + out.strip().rsplit("= ", 1)[1]
    assert hooks.signature(SECRET, str(ts), BODY) == hooks.signature(SECRET, ts, BODY)
    assert hooks.github_signature(SECRET, BODY) != hooks.signature(SECRET, ts, BODY)


def headers(ts, sig) -> dict:
    return {"x-tollgate-timestamp": str(ts), "X-TOLLGATE-SIGNATURE": sig}  # any case


def test_verify_tollgate():
    now = time.time()
    ts = int(now)
    good = hooks.signature(SECRET, ts, BODY)
    verdict = hooks.verify_tollgate([SECRET], headers(ts, good), BODY, now)
    assert verdict.ok and not verdict.previous and len(verdict.digest) == 64
    assert hooks.verify_tollgate(["new", SECRET], headers(ts, good), BODY, now).previous
    assert hooks.verify_tollgate(["new"], headers(ts, good), BODY, now).reason == "bad signature"
    assert not hooks.verify_tollgate([SECRET], headers(ts, good), BODY + b" ", now).ok
    assert not hooks.verify_tollgate([SECRET], headers(ts, good.upper()), BODY, now).ok
    for bad_ts in ("", "-5", "1e9", "12.5", "٣", "9" * 40):
        verdict = hooks.verify_tollgate([SECRET], headers(bad_ts, good), BODY, now)
        assert verdict.status == 401 and verdict.reason.startswith("stale"), bad_ts
    old = ts - hooks.MAX_SKEW_S - 1
    stale = hooks.verify_tollgate([SECRET], headers(old, hooks.signature(SECRET, old, BODY)), BODY, now)
    assert stale.reason.startswith("stale")
    edge = ts - hooks.MAX_SKEW_S
    assert hooks.verify_tollgate([SECRET], headers(edge, hooks.signature(SECRET, edge, BODY)), BODY, ts).ok
    assert hooks.verify_tollgate([SECRET], {"X-Tollgate-Timestamp": str(ts)}, BODY, now).status == 401


def test_verify_github():
    sig = hooks.github_signature(SECRET, BODY)
    verdict = hooks.verify_github([SECRET], {"X-Hub-Signature-256": sig, "X-GitHub-Delivery": "d-1"}, BODY)
    assert verdict.ok and verdict.delivery == "d-1"
    assert not hooks.verify_github(["other"], {"X-Hub-Signature-256": sig}, BODY).ok
    assert hooks.verify_github([SECRET], {}, BODY).status == 401


def test_signed_headers_verify():
    now = time.time()
    assert hooks.verify_tollgate([SECRET], hooks.signed_headers(SECRET, BODY, now), BODY, now).ok


def test_post_goes_to_the_pinned_address_whatever_the_name_resolves_to():
    receiver = CallbackReceiver().start()
    try:
        port = receiver.server.server_address[1]
        # The name does not resolve at all: only the pinned address can be what was reached.
        status = hooks.post(
            f"http://callback.tollgate.invalid:{port}/cb?x=1", "127.0.0.1", BODY, {"X-A": "b"}
        )
        assert status == 200
        [got] = receiver.received
        assert got.body == BODY and got.headers["Host"] == f"callback.tollgate.invalid:{port}"
        assert got.headers["X-A"] == "b" and got.headers["Content-Type"] == "application/json"
    finally:
        receiver.stop()


def test_post_checks_https_certificates(tls_server):
    # A self-signed receiver: refused, the body never sent to an unverified peer; the reason is the
    # one generic text (an untrusted certificate is among the causes it names).
    with pytest.raises(OSError) as refused:
        hooks.post(tls_server.url("/cb"), "127.0.0.1", BODY, {})
    assert str(refused.value) == hooks.NO_ANSWER and "certificate" in hooks.NO_ANSWER
    assert tls_server.counters.snapshot()["requests"] == 0
