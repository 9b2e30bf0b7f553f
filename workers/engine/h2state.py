"""The state of one HTTP/2 connection of the timed client (``workers.engine.http2``): its streams in
flight, the ``h2`` state machine, and the errors a stream or the connection can end with."""

from __future__ import annotations

import collections

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from h2.connection import ConnectionState

from workers.engine.http1 import ConnectionClosed, ProtocolError


class ALPNRefused(ProtocolError):
    """The server did not select h2 over ALPN: the arm would measure HTTP/1.1, so it is refused."""


class StreamReset(ProtocolError):
    """The server reset the request's stream (RST_STREAM); ``refused`` for REFUSED_STREAM."""

    def __init__(self, code: str) -> None:
        super().__init__(f"stream reset by the server ({code})")
        self.refused = code == "REFUSED_STREAM"


class GoAway(ConnectionClosed):
    """The server ended the connection (GOAWAY) before answering this stream."""

    def __init__(self, code: str, unprocessed: bool) -> None:
        super().__init__(f"GOAWAY ({code}) before the answer")
        self.unprocessed = unprocessed  # above the GOAWAY's last stream id: safe to send again


def code_name(code) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return f"0x{int(code):x}"


def classify_h2(exc: BaseException) -> str | None:
    """The error class of an HTTP/2 failure (None: the HTTP/1.1 client's classes apply)."""
    if isinstance(exc, ALPNRefused):
        return "alpn_refused"
    if isinstance(exc, StreamReset):
        return "refused_stream" if exc.refused else "stream_reset"
    if isinstance(exc, GoAway):
        return "goaway"
    if isinstance(exc, h2.exceptions.ProtocolError):
        return "protocol_error"
    return None


class Stream:
    __slots__ = ("status", "headers", "body", "kept", "t_first", "t_last", "done", "error", "wake")

    def __init__(self, wake) -> None:
        self.status: int | None = None
        self.headers: dict[str, str] = {}
        self.body = 0
        self.kept: bytearray | None = None
        self.t_first = self.t_last = 0
        self.done = False
        self.error: BaseException | None = None
        self.wake = wake  # a gevent Event under gevent (another lane may read for this one), else None


class Connection:
    """One HTTP/2 connection: the socket, the ``h2`` state machine and the streams in flight."""

    __slots__ = (
        "sock",
        "h2",
        "streams",
        "reading",
        "write_lock",
        "settings_seen",
        "peer_max",
        "ending",
        "closed",
        "slot_waiters",
        "requests",
    )

    def __init__(self, sock, write_lock) -> None:
        self.sock = sock
        config = h2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        self.h2 = h2.connection.H2Connection(config)
        self.streams: dict[int, Stream] = {}
        self.reading = False
        self.write_lock = write_lock
        self.settings_seen = False  # the server's first SETTINGS frame has been read
        self.peer_max: int | None = None  # its SETTINGS_MAX_CONCURRENT_STREAMS, when it set one
        self.ending: tuple[str, int] | None = None  # a GOAWAY's (code name, last stream id)
        self.closed = False
        self.slot_waiters: collections.deque = collections.deque()
        self.requests = 0

    def flush(self) -> None:
        """Send what the state machine has queued (a window update, a SETTINGS or PING
        acknowledgement; mostly nothing), under the write lock: lanes share the socket. Taken out
        first: control frames may follow a lane's HEADERS in any order, and only the lane holding the
        lock takes out a HEADERS frame."""
        out = self.h2.data_to_send()
        if out:
            with self.write_lock:
                self.sock.sendall(out)

    def usable(self) -> bool:
        closed = self.closed or self.h2.state_machine.state == ConnectionState.CLOSED
        return not closed and self.ending is None


def fill_head(stream: Stream, headers) -> None:
    found: dict[str, str] = {}
    for name, value in headers:
        if name == b":status":
            stream.status = int(value)
        elif name in (b"content-type", b"content-encoding", b"location", b"server"):
            found[name.decode("ascii")] = value.decode("latin-1")
    stream.headers = found


def finish_stream(stream: Stream | None, now: int) -> None:
    """A stream's last frame arrived at ``now`` (its first too, when nothing came before): done."""
    if stream is None or stream.done:
        return
    stream.t_last = now
    if not stream.t_first:
        stream.t_first = now
    stream.done = True
    if stream.wake is not None:
        stream.wake.set()


PROBE_ENDS = (h2.events.StreamEnded, h2.events.StreamReset, h2.events.ConnectionTerminated)


def probe_request(send, recv, authority: str) -> None:
    """The TLS matrix's probe of an HTTP/2 variant (``workers.engine.variants``), on a connection that
    negotiated h2: the preface and one ``HEAD /`` on stream 1, read until that stream ends (the TLS 1.3
    session tickets arrive after the handshake, before the answer). ``send(bytes)``, ``recv() -> bytes``
    (b"" at the end). A protocol failure ends it quietly, as the HTTP/1.1 probe's request: the handshake
    is what the probe checks."""
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
    conn.initiate_connection()
    head = [
        (b":method", b"HEAD"),
        (b":scheme", b"https"),
        (b":authority", authority.encode("latin-1")),
        (b":path", b"/"),
    ]
    conn.send_headers(1, head, end_stream=True)
    try:
        send(conn.data_to_send())
        while data := recv():
            if any(isinstance(event, PROBE_ENDS) for event in conn.receive_data(data)):
                return
            out = conn.data_to_send()
            if out:
                send(out)
    except h2.exceptions.H2Error:
        return
