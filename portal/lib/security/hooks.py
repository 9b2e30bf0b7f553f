"""Signed webhooks, both directions: verifying a trigger's request and signing (and sending) a callback.

Tollgate's format (docs/ci.md): ``X-Tollgate-Timestamp: <Unix seconds>`` and
``X-Tollgate-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>." + raw body>``. The timestamp is
inside the MAC, so an old request cannot be made fresh; one more than ``MAX_SKEW_S`` off is stale.
GitHub's format: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`` with
``X-GitHub-Delivery`` naming the delivery; GitHub sends no timestamp, so a repeat is recognised by its
delivery id (the caller's idempotency) and by its signature (the caller's replay check).

Every comparison is ``hmac.compare_digest`` over all candidate secrets, without an early exit.
Django-free: the caller passes headers as any mapping and the clock as a number.
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from portal.lib.security.netpolicy import DEFAULT_PORTS, NO_ANSWER, is_address

TIMESTAMP_HEADER = "X-Tollgate-Timestamp"
SIGNATURE_HEADER = "X-Tollgate-Signature"
GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
GITHUB_DELIVERY_HEADER = "X-GitHub-Delivery"
MAX_SKEW_S = 300
MAX_BODY_BYTES = 64 * 1024
PREFIX = "sha256="
CALLBACK_TIMEOUT_S = 10.0
RESPONSE_MAX_BYTES = 4096
USER_AGENT = "Tollgate-Callback/1"


@dataclass(frozen=True)
class Outcome:
    """What verification decided: ``status`` 0 when the signature holds, else the HTTP status to
    answer (401) with ``reason``. ``digest`` identifies the signature (sha256 of the header value)
    for replay detection; ``delivery`` is GitHub's delivery id; ``previous`` says the secret that
    matched is the one being rotated out."""

    status: int
    reason: str = ""
    digest: str = ""
    delivery: str = ""
    previous: bool = False

    @property
    def ok(self) -> bool:
        return self.status == 0


def _mac(secret: str, message: bytes) -> str:
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def signature(secret: str, timestamp: int | str, body: bytes) -> str:
    """``sha256=<hex>`` of ``b"<timestamp>." + body``: the value of X-Tollgate-Signature."""
    return PREFIX + _mac(secret, str(timestamp).encode("ascii") + b"." + body)


def github_signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>`` of the body: the value of X-Hub-Signature-256."""
    return PREFIX + _mac(secret, body)


def signed_headers(secret: str, body: bytes, now: float) -> dict[str, str]:
    """The headers of a request signed in Tollgate's format (callbacks)."""
    timestamp = int(now)
    return {TIMESTAMP_HEADER: str(timestamp), SIGNATURE_HEADER: signature(secret, timestamp, body)}


def header(headers: Mapping[str, str], name: str) -> str:
    """A header's value, whatever the mapping's case rules ("" when absent)."""
    value = headers.get(name)
    if value is None:
        wanted = name.lower()
        value = next((v for k, v in headers.items() if k.lower() == wanted), "")
    return str(value).strip()


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()


def _matches(secrets: list[str], given: str, expected_of) -> tuple[bool, bool]:
    """(matched, matched by a secret after the first) — every secret compared, no early exit."""
    found, previous = False, False
    given_bytes = given.encode("utf-8", "replace")
    for index, secret in enumerate(secrets):
        same = hmac.compare_digest(expected_of(secret).encode("ascii"), given_bytes)
        found |= same
        previous |= same and index > 0
    return found, previous


def verify_tollgate(secrets: list[str], headers: Mapping[str, str], body: bytes, now: float) -> Outcome:
    """Tollgate's format against ``secrets`` (current first, then one in its grace period)."""
    raw_ts = header(headers, TIMESTAMP_HEADER)
    given = header(headers, SIGNATURE_HEADER)
    if not raw_ts:
        return Outcome(401, f"stale: no {TIMESTAMP_HEADER} header")
    if not (raw_ts.isascii() and raw_ts.isdigit()) or len(raw_ts) > 12:
        return Outcome(401, f"stale: {TIMESTAMP_HEADER} is not Unix seconds")
    if abs(now - int(raw_ts)) > MAX_SKEW_S:
        return Outcome(401, f"stale: the timestamp is more than {MAX_SKEW_S} s off the portal's clock")
    if not given:
        return Outcome(401, f"bad signature: no {SIGNATURE_HEADER} header")
    ok, previous = _matches(secrets, given, lambda secret: signature(secret, raw_ts, body))
    if not ok:
        return Outcome(401, "bad signature")
    return Outcome(0, digest=_digest(given), previous=previous)


def verify_github(secrets: list[str], headers: Mapping[str, str], body: bytes) -> Outcome:
    """GitHub's format: the body's HMAC; the delivery id comes back for idempotency."""
    given = header(headers, GITHUB_SIGNATURE_HEADER)
    delivery = header(headers, GITHUB_DELIVERY_HEADER)[:200]
    if not given:
        return Outcome(401, f"bad signature: no {GITHUB_SIGNATURE_HEADER} header")
    ok, previous = _matches(secrets, given, lambda secret: github_signature(secret, body))
    if not ok:
        return Outcome(401, "bad signature")
    return Outcome(0, digest=_digest(given), delivery=delivery, previous=previous)


def canonical(payload: dict) -> bytes:
    """The exact bytes a callback sends (and signs)."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to the checked address; the certificate is verified for the URL's host name (the
    callback carries results to a receiver the project named: it must be that receiver)."""

    def __init__(self, pinned: str, host: str, port: int, timeout: float, context: ssl.SSLContext) -> None:
        super().__init__(pinned, port, timeout=timeout, context=context)
        self.server_name = host

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.server_name)


def post(url: str, pinned: str, body: bytes, headers: dict[str, str], timeout_s: float | None = None) -> int:
    """POST ``body`` to ``url``, connecting only to ``pinned`` (the address the outbound policy
    checked). Returns the response status; OSError(NO_ANSWER) when no HTTP answer came back,
    whatever the cause (the callback log must not repeat the peer's bytes)."""
    timeout_s = CALLBACK_TIMEOUT_S if timeout_s is None else timeout_s
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or DEFAULT_PORTS[parts.scheme]
    if parts.scheme == "https":
        context = ssl.create_default_context()
        if is_address(host):  # no name to check: the address itself is what was asked for
            context.check_hostname = False
        conn: http.client.HTTPConnection = _PinnedHTTPS(pinned, host, port, timeout_s, context)
    else:
        conn = http.client.HTTPConnection(pinned, port, timeout=timeout_s)
    shown = f"[{host}]" if ":" in host else host
    try:
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.putrequest("POST", target, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", shown if port == DEFAULT_PORTS[parts.scheme] else f"{shown}:{port}")
        for name, value in {
            "User-Agent": USER_AGENT,
            "Content-Type": "application/json",
            "Content-Length": str(len(body)),
            "Connection": "close",
            **headers,
        }.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        response.read(RESPONSE_MAX_BYTES)
        return response.status
    except (OSError, http.client.HTTPException, ValueError):
        raise OSError(NO_ANSWER) from None
    finally:
        conn.close()
