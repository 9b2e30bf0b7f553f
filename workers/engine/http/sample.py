"""One request's timed outcome (``Sample``), what every timed client returns and the arm's recorder
reads, and how a failure is classified (``classify_error``) so that it becomes data, never a crash."""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass

# The failures that mean the target did not answer at all (refused, reset, timed out, a network
# error): what the preflight calls unreachable and the unreachable-target rule counts.
CONNECTION_ERRORS = frozenset({"connection_refused", "connection_reset", "timeout", "os_error"})


class ProtocolError(Exception):
    """The server's answer was not valid HTTP."""


class ConnectionClosed(ProtocolError):
    """The server closed the connection before the first byte of a response."""


@dataclass(slots=True)
class Sample:
    """One request's outcome. Times in µs; ``None`` where the phase did not happen."""

    url: str
    start_ns: int
    end_ns: int = 0
    status: int | None = None
    body_bytes: int = 0
    connect_us: int | None = None
    tls_handshake_us: int | None = None
    ttfb_us: int | None = None
    ttlb_us: int | None = None
    session_reused: bool | None = None
    # Keep-alive: this request opened a connection because the server had closed the previous one.
    reopened: bool = False
    location: str | None = None  # Location header of a redirect
    content_type: str = ""  # Content-Type header as sent ("" when absent)
    content_encoding: str = ""  # Content-Encoding header as sent ("" when absent: identity)
    server: str | None = None  # Server header as sent (None when absent): the preflight records it
    schedule_lag_us: int = 0  # open loop: how late the request started against its schedule
    # HTTP/2 (workers.engine.http.http2): ALPN and server stream limit (opening request), streams in flight
    # at send (itself included), a GOAWAY's error code name (the request that saw it).
    alpn: str | None = None
    peer_max_streams: int | None = None
    streams_in_flight: int = 0
    goaway: str | None = None
    error: str | None = None
    error_detail: str | None = None


def _us(start_ns: int, end_ns: int) -> int:
    return max(1, (end_ns - start_ns + 500) // 1000)


def classify_error(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError | ssl.CertificateError):
        return "tls_error"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timeout"
    if isinstance(exc, ConnectionRefusedError):
        return "connection_refused"
    if isinstance(exc, ConnectionResetError | BrokenPipeError | ConnectionClosed):
        return "connection_reset"
    if isinstance(exc, ProtocolError):
        return "protocol_error"
    if isinstance(exc, OSError):
        return "os_error"
    return type(exc).__name__
