"""The state of one HTTP/2 connection of the timed client (``workers.engine.http2``): its streams in
flight, the ``h2`` state machine, and the errors a stream or the connection can end with."""

from __future__ import annotations

import collections

import h2.config
import h2.connection
import h2.errors
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
