"""The state of one HTTP/2 connection of the timed client (``workers.engine.http.http2``): its streams in
flight, the ``jh2`` state machine, and the errors a stream or the connection can end with.

``jh2`` is ``h2``'s fork with a compiled HPACK (same API and events): about half the client CPU per
request. Its per-request header passes are off in the connection's configuration and done where they
cost least, with the library's own functions: the request's header list is normalised and validated
once when it is built (``request_headers``), and each received header block is validated once per
distinct block (``HeaderCheck``): a malformed answer still fails its request."""

from __future__ import annotations

import collections

import jh2.config
import jh2.connection
import jh2.errors
import jh2.events
import jh2.exceptions
from jh2.connection import ConnectionState
from jh2.utilities import (
    HeaderValidationFlags,
    normalize_outbound_headers,
    validate_headers,
    validate_outbound_headers,
)

from workers.engine.http import nghttp2
from workers.engine.http.sample import ConnectionClosed, ProtocolError


class ALPNRefused(ProtocolError):
    """The server did not select h2 over ALPN: the arm would measure HTTP/1.1, so it is refused."""


class StreamReset(ProtocolError):
    """The server reset the request's stream (RST_STREAM); ``refused`` for REFUSED_STREAM."""

    def __init__(self, code: str) -> None:
        super().__init__(f"stream reset by the server ({code})")
        self.refused = code == "REFUSED_STREAM"


class MalformedHeaders(ProtocolError):
    """A header block broke HTTP/2's rules (RFC 9113 §8.2, §8.3: a missing or repeated ``:status``, an
    upper-case or connection-specific field, a ``host`` unlike ``:authority``, …): the server's on a
    stream, or the request's own (a run's custom header). The request fails (``protocol_error``), the
    connection goes on."""


class GoAway(ConnectionClosed):
    """The server ended the connection (GOAWAY) before answering this stream."""

    def __init__(self, code: str, unprocessed: bool) -> None:
        super().__init__(f"GOAWAY ({code}) before the answer")
        self.unprocessed = unprocessed  # above the GOAWAY's last stream id: safe to send again


def code_name(code) -> str:
    try:
        return jh2.errors.ErrorCodes(code).name
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
    if isinstance(exc, jh2.exceptions.ProtocolError):
        return "protocol_error"
    return None


# HeaderValidationFlags(is_client, is_trailer, is_response_header, is_push_promise)
REQUEST_FLAGS = HeaderValidationFlags(True, False, False, False)


def request_headers(headers: list) -> list:
    """A request's header list as ``jh2`` sends it with its outbound normalisation and validation on
    (lower-case names, no connection-specific fields, ``authorization`` never indexed; pseudo-fields
    first, ``:authority`` and ``:path`` present), done once for a list sent again and again: the
    connection's configuration skips them per request. Raises ``MalformedHeaders``."""
    try:
        normalised = normalize_outbound_headers(headers, REQUEST_FLAGS, False)
        return list(validate_outbound_headers(normalised, REQUEST_FLAGS))
    except jh2.exceptions.ProtocolError as exc:
        raise MalformedHeaders(f"the request's headers are not valid HTTP/2: {exc}") from None


HEADER_CHECK_LIMIT = 256  # distinct header blocks remembered as valid (cleared when full)


class HeaderCheck:
    """``jh2``'s validation of a received header block (``validate_headers``, what its
    ``validate_inbound_headers`` runs on every block), run once per distinct block: an answer's header
    block is mostly the same as the last one (nginx's changes with its ``date``, once a second), so
    the check costs a lookup, where the library's per-block pass was about a tenth of the client's CPU
    per request. A block that fails is never remembered: each answer carrying it fails. An answer's
    block is read once too (``response``: its status and the fields a report keeps, ``fill_head``)."""

    __slots__ = ("valid", "heads")

    def __init__(self) -> None:
        self.valid: set = set()
        # A valid answer's header block -> (its status, the fields kept): what ``fill_head`` reads.
        self.heads: dict[tuple, tuple[int | None, dict[str, str]]] = {}

    def response(self, stream: Stream, event, now: int) -> bool:
        """An answer's header block (``ResponseReceived``): checked and read into ``stream`` (its
        status and kept fields) once per distinct block, a dict lookup after; if it is malformed the
        stream fails and is done (False), every time."""
        key = tuple(event.headers)
        head = self.heads.get(key)
        if head is None:
            if not self.passes(stream, event, now):
                return False
            fill_head(stream, key)
            if len(self.heads) >= HEADER_CHECK_LIMIT:
                self.heads.clear()
            self.heads[key] = (stream.status, stream.headers)
            return True
        stream.status, stream.headers = head  # the kept fields are only read (``_note_headers``)
        return True

    def check(self, headers: list, flags: HeaderValidationFlags) -> None:
        key = (flags, tuple(headers))
        if key in self.valid:
            return
        try:
            for _ in validate_headers(headers, flags):
                pass
        except jh2.exceptions.ProtocolError as exc:
            raise MalformedHeaders(f"malformed response headers: {exc}") from None
        if len(self.valid) >= HEADER_CHECK_LIMIT:
            self.valid.clear()
        self.valid.add(key)

    def passes(self, stream: Stream, event, now: int) -> bool:
        """Whether the event's header block is valid; if not, its stream fails and is done."""
        try:
            self.check(event.headers, HEADER_EVENTS[type(event)])
        except MalformedHeaders as exc:
            if stream.error is None:
                stream.error = exc
            finish_stream(stream, now)
            return False
        return True


# The received header blocks checked, by event: an answer's, an informational (1xx) one's, trailers.
HEADER_EVENTS = {
    jh2.events.ResponseReceived: HeaderValidationFlags(True, False, True, False),
    jh2.events.InformationalResponseReceived: HeaderValidationFlags(True, False, True, False),
    jh2.events.TrailersReceived: HeaderValidationFlags(True, True, False, False),
}


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


ACK_BATCH_BYTES = 2**20  # with a 2**30 connection window: ended streams' DATA handed back per MiB


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
        "unacknowledged",
        "ack_batch_bytes",
    )

    def __init__(self, sock, write_lock) -> None:
        self.sock = sock
        # The per-block header passes are done once instead (module docstring): off here.
        config = jh2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        self.h2 = nghttp2.NgConnection() if nghttp2.library() else jh2.connection.H2Connection(config)
        self.streams: dict[int, Stream] = {}
        self.reading = False
        self.write_lock = write_lock
        self.settings_seen = False  # the server's first SETTINGS frame has been read
        self.peer_max: int | None = None  # its SETTINGS_MAX_CONCURRENT_STREAMS, when it set one
        self.ending: tuple[str, int] | None = None  # a GOAWAY's (code name, last stream id)
        self.closed = False
        self.slot_waiters: collections.deque = collections.deque()
        self.requests = 0
        # Received DATA of ended streams not yet handed back to the library (``acknowledge``), and how
        # much may wait: 0 (each frame at once) unless the receive window was opened wide.
        self.unacknowledged = 0
        self.ack_batch_bytes = 0

    def acknowledge(self, event) -> None:
        """Hand a DATA frame's flow-controlled bytes back to the library's window accounting. On a
        stream still open, at once (its window must reopen for the rest of the body); on a stream this
        frame ended only the connection's window is concerned, and its bytes are added up and handed
        back in one call once ``ack_batch_bytes`` have come. ``H2Client`` opens the connection window to
        2**30 bytes and lets 1 MiB wait (``ACK_BATCH_BYTES``): the library sends its WINDOW_UPDATE when
        half the window is processed, so what waits can never stall the server; it saves a library
        call per answer."""
        if event.stream_ended is None:
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            return
        self.unacknowledged += event.flow_controlled_length
        if self.unacknowledged >= self.ack_batch_bytes:
            self.h2.acknowledge_received_data(self.unacknowledged, event.stream_id)
            self.unacknowledged = 0

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


KEPT_HEADERS = {name.encode(): name for name in ("content-type", "content-encoding", "location", "server")}


def fill_head(stream: Stream, headers) -> None:
    found: dict[str, str] = {}
    for name, value in headers:
        if name == b":status":
            stream.status = int(value)
        else:
            kept = KEPT_HEADERS.get(name)
            if kept is not None:
                found[kept] = value.decode("latin-1")
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


HEAD_REQUEST_ENDS = (jh2.events.StreamEnded, jh2.events.StreamReset, jh2.events.ConnectionTerminated)


def head_request(send, recv, authority: str) -> None:
    """The request of an HTTP/2 variant's handshake (``workers.engine.matrix.variants.negotiate``),
    on a connection that negotiated h2: the preface and one ``HEAD /`` on stream 1, read until that
    stream ends (the TLS 1.3 session tickets arrive after the handshake, before the answer).
    ``send(bytes)``, ``recv() -> bytes`` (b"" at the end). A protocol failure ends it quietly, as the
    HTTP/1.1 variant's request: the handshake is what ``negotiate`` checks."""
    conn = jh2.connection.H2Connection(jh2.config.H2Configuration(client_side=True, header_encoding=None))
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
            if any(isinstance(event, HEAD_REQUEST_ENDS) for event in conn.receive_data(data)):
                return
            out = conn.data_to_send()
            if out:
                send(out)
    except jh2.exceptions.H2Error:
        return
