"""How an HTTP/3 request fails, in the words of the other clients' errors (``client.classify_error``):
a server without QUIC is refused fast and says why, never measured over TCP instead."""

from __future__ import annotations

from qh3.quic.connection import QuicConnectionError

from workers.engine.http.sample import ConnectionClosed, ProtocolError

CRYPTO_ERROR = 0x100  # QUIC's CRYPTO_ERROR range: 0x100 + the TLS alert (RFC 9001 §4.8)
NO_APPLICATION_PROTOCOL = 120  # the TLS alert of an ALPN nobody shares
H3_REQUEST_REJECTED = 0x10B
H3_CODES = {
    0x100: "H3_NO_ERROR",
    0x101: "H3_GENERAL_PROTOCOL_ERROR",
    0x102: "H3_INTERNAL_ERROR",
    0x103: "H3_STREAM_CREATION_ERROR",
    0x104: "H3_CLOSED_CRITICAL_STREAM",
    0x105: "H3_FRAME_UNEXPECTED",
    0x106: "H3_FRAME_ERROR",
    0x107: "H3_EXCESSIVE_LOAD",
    0x108: "H3_ID_ERROR",
    0x109: "H3_SETTINGS_ERROR",
    0x10A: "H3_MISSING_SETTINGS",
    0x10B: "H3_REQUEST_REJECTED",
    0x10C: "H3_REQUEST_CANCELLED",
    0x10D: "H3_REQUEST_INCOMPLETE",
    0x10E: "H3_MESSAGE_ERROR",
    0x10F: "H3_CONNECT_ERROR",
    0x110: "H3_VERSION_FALLBACK",
}
TRANSPORT_CODES = {
    0x0: "NO_ERROR",
    0x1: "INTERNAL_ERROR",
    0x2: "CONNECTION_REFUSED",
    0x3: "FLOW_CONTROL_ERROR",
    0x4: "STREAM_LIMIT_ERROR",
    0x5: "STREAM_STATE_ERROR",
    0x6: "FINAL_SIZE_ERROR",
    0x7: "FRAME_ENCODING_ERROR",
    0x8: "TRANSPORT_PARAMETER_ERROR",
    0x9: "CONNECTION_ID_LIMIT_ERROR",
    0xA: "PROTOCOL_VIOLATION",
    0xB: "INVALID_TOKEN",
    0xC: "APPLICATION_ERROR",
    0xD: "CRYPTO_BUFFER_EXCEEDED",
    0xE: "KEY_UPDATE_ERROR",
    0xF: "AEAD_LIMIT_REACHED",
    0x10: "NO_VIABLE_PATH",
    0x11: "VERSION_NEGOTIATION_ERROR",
}


class QuicRefused(ConnectionRefusedError):
    """Nothing listens on the UDP port (the host answered the first datagram with ICMP port
    unreachable): the server does not speak QUIC there. ``connection_refused``."""


class QuicNoAnswer(TimeoutError):
    """Not one datagram came back during the handshake's time: no QUIC server there, or UDP dropped on
    the way. ``timeout``, with that said in the detail."""


class ALPNRefused(ProtocolError):
    """The QUIC server does not speak HTTP/3 (it refused ALPN h3, or selected another protocol): the arm
    is refused (``alpn_refused``), as the HTTP/2 arms are."""


class QuicClosed(ConnectionClosed):
    """The connection ended before the answer: the server closed it (CONNECTION_CLOSE), an idle
    timeout, or one side's checks failed (``tls``: a CRYPTO_ERROR, a TLS alert, e.g. an untrusted
    certificate; else a transport or HTTP/3 error). qh3 reports its own closes and the server's alike:
    the code and reason say which check failed."""

    def __init__(self, code: int, frame_type: int | None, reason: str) -> None:
        self.code, self.reason = code, reason
        # A transport close names the frame that failed; an application (HTTP/3) close does not.
        self.application = frame_type is None
        self.tls = not self.application and CRYPTO_ERROR <= code < CRYPTO_ERROR + 0x100
        name = close_code_name(code, self.application)
        super().__init__(f"the QUIC connection was closed ({name}{': ' + reason if reason else ''})")


class StreamReset(ProtocolError):
    """The server reset the request's stream (RESET_STREAM); ``refused`` for H3_REQUEST_REJECTED."""

    def __init__(self, code: int) -> None:
        super().__init__(f"stream reset by the server ({H3_CODES.get(code, hex(code))})")
        self.refused = code == H3_REQUEST_REJECTED


class GoAway(ConnectionClosed):
    """The server's GOAWAY came before this stream was answered (``unprocessed``: at or above its
    stream id, safe to send again)."""

    def __init__(self, unprocessed: bool) -> None:
        super().__init__("HTTP/3 GOAWAY before the answer")
        self.unprocessed = unprocessed


class MalformedAnswer(ProtocolError):
    """The answer broke HTTP/3's rules (no or a bad ``:status``)."""


def close_code_name(code: int, application: bool) -> str:
    """A CONNECTION_CLOSE's code by name: HTTP/3's for an application close, else QUIC's transport
    codes (RFC 9000 §20.1), a CRYPTO_ERROR as its TLS alert."""
    if application:
        return H3_CODES.get(code, f"0x{code:x}")
    if CRYPTO_ERROR <= code < CRYPTO_ERROR + 0x100:
        return f"TLS alert {code - CRYPTO_ERROR}"
    return TRANSPORT_CODES.get(code, f"0x{code:x}")


def classify_h3(exc: BaseException) -> str | None:
    """The error class of an HTTP/3 failure (None: ``client.classify_error``'s classes apply: a
    ``QuicRefused`` is ``connection_refused``, a ``QuicNoAnswer`` ``timeout``)."""
    if isinstance(exc, ALPNRefused):
        return "alpn_refused"
    if isinstance(exc, QuicClosed):
        return "tls_error" if exc.tls else "connection_reset"
    if isinstance(exc, StreamReset):
        return "refused_stream" if exc.refused else "stream_reset"
    if isinstance(exc, GoAway):
        return "goaway"
    if isinstance(exc, QuicConnectionError):  # the library refused what it was given or received
        return "protocol_error"
    return None
