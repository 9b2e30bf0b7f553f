"""The timed client's HTTP/2: the ``h2``, ``h2_new`` and ``h2c`` arms (docs/engine-protocol.md).

The protocol is the ``jh2`` package's (``h2`` with a compiled HPACK: HPACK, flow control, SETTINGS,
stream states; its header checks done once per header list, ``http2_state``); sockets, TLS, waits
and timers are the timed client's own, so TTFB/TTLB are per request in µs and a new
connection's TCP connect and TLS handshake are timed apart, as on the HTTP/1.1 arms.

* ``h2``: one connection per user, up to ``streams`` of its requests in flight (never more than the
  server's SETTINGS_MAX_CONCURRENT_STREAMS; one until its SETTINGS arrive). After a GOAWAY the next
  request opens another (``Sample.reopened``); a request the GOAWAY left unprocessed is sent once more.
* ``h2_new``: a new connection (TCP + TLS handshake, ALPN h2) per request; ``h2c``: prior knowledge.
  The TLS matrix's sub-arms (``h2_new@…``, ``h2@…``) are these with the variant's context; a resuming
  one (``h2_new@…+ticket``) offers the session of the user's previous connection, as ``tls_resumed``.

Timing: on a kept connection from the first byte handed to the socket, else from the request's start
(connect or stream-slot waits in); the library's frame building is never inside (the HTTP/1.1 client
has its bytes ready too); parsing happens after the arrival time is taken. TLS offers h2 alone over
ALPN: a server that selects nothing else fails with ``ALPNRefused``, a refused arm, never HTTP/1.1.
Reading is leader/follower: the lane awaiting an answer reads when no other lane does, hands each
frame to its stream and wakes that lane; a frame's time is that of the ``recv`` that carried it.
"""

from __future__ import annotations

import contextlib
import ssl
import time

import jh2.events
import jh2.exceptions
import jh2.settings

from workers.engine.http.endpoint import ConnectionPolicy, Endpoint
from workers.engine.http.http1 import RECV_SIZE, USER_AGENT, TimedClient, _note_headers
from workers.engine.http.http2_state import (
    ACK_BATCH_BYTES,
    HEADER_EVENTS,
    ALPNRefused,
    Connection,
    GoAway,
    HeaderCheck,
    MalformedHeaders,
    Stream,
    StreamReset,
    classify_h2,
    code_name,
    finish_stream,
    request_headers,
)
from workers.engine.http.sample import ConnectionClosed, ProtocolError, Sample, _us, classify_error

MAX_STREAMS = 100  # the most ``h2_streams`` a run may ask (portal.lib.runs.runspec)
BODY_KEPT_BYTES = 1024  # the preflight's look at an unexpected answer (``keep_body``)


class H2Client(TimedClient):
    """One virtual user's HTTP/2 connection(s) to one endpoint (the arm's ``ConnectionPolicy`` with
    ``http2``); ``streams``: how many of the user's requests may be in flight on its connection."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: ConnectionPolicy,
        ssl_context,
        *,
        timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
        streams: int = 1,
    ) -> None:
        super().__init__(endpoint, policy, ssl_context, timeout_s=timeout_s, headers=headers)
        # On plain threads (no gevent) one request at a time: no lane can read for another.
        self.streams = max(1, min(streams, MAX_STREAMS)) if self._coop else 1
        self.conn: Connection | None = None
        self._goaway_note: str | None = None  # a GOAWAY read, for the next request to report
        self.keep_body = False  # the preflight keeps the first bytes of each answer (``body_head``)
        self._body_head = b""
        authority = endpoint.host_header.encode("latin-1")
        self._origin = [(b":scheme", endpoint.scheme.encode()), (b":authority", authority)]
        self._extra = [(b"user-agent", USER_AGENT.encode()), (b"accept", b"*/*")] + [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in (headers or {}).items()
        ]
        self._header_lists: dict[tuple[str, str], list] = {}  # (method, path) -> the request's headers
        self._header_check = HeaderCheck()  # received header blocks known valid
        # Lanes share the connection only with several streams: with one, nobody reads for another lane,
        # so a request needs no event to be woken by.
        self._shared = self.streams > 1
        if self._coop:
            from gevent.event import Event
            from gevent.lock import Semaphore

            self._event, self._lock = Event, Semaphore
        else:
            self._event, self._lock = None, contextlib.nullcontext
        # One lane opens a connection at a time (the user's waits share one timer, cooperative.UserWaits).
        self._opening = self._lock()

    # -- connections ------------------------------------------------------------------------

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self._end(conn, ConnectionClosed("connection closed by the client"))
        super().close()

    def _end(self, conn: Connection, why: BaseException) -> None:
        """Close ``conn`` and fail whatever was still in flight on it."""
        conn.closed = True
        for stream in list(conn.streams.values()):
            if not stream.done:
                stream.error, stream.done = why, True
                if stream.wake is not None:
                    stream.wake.set()
        conn.streams.clear()
        self._wake_slot(conn, everyone=True)
        if self.conn is conn:
            self.conn = None
        if self.sock is conn.sock:
            self.sock = None
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _open_h2(self, sample: Sample) -> Connection:
        """A new connection (TCP, TLS with ALPN h2 or prior knowledge), its preface sent."""
        self.sock = None
        try:
            self._open(sample)  # TCP connect and TLS handshake, timed apart (``TimedClient._open``)
        except ssl.SSLError as exc:
            # A server whose ALPN callback rejects every offer ends the handshake with an alert.
            if "NO_APPLICATION_PROTOCOL" in str(exc).upper().replace(" ", "_"):
                said = f"the server does not offer HTTP/2 over ALPN (its handshake alert: {exc})"
                raise ALPNRefused(said) from None
            raise
        sock = self.sock
        if self._tls:
            chosen = sock.selected_alpn_protocol()
            sample.alpn = chosen
            if chosen != "h2":
                self.sock = None
                sock.close()
                said = f"it selected {chosen}" if chosen else "it selected no protocol"
                raise ALPNRefused(f"the server does not offer HTTP/2 over ALPN ({said}; h2 offered alone)")
        else:
            sample.alpn = "h2c"
        conn = Connection(sock, self._lock())
        conn.h2.initiate_connection()
        # A large receive window: flow control must not pace the answers (h2load does the same).
        conn.h2.increment_flow_control_window(2**30 - 65535)
        conn.h2.update_settings({jh2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**24})
        conn.ack_batch_bytes = ACK_BATCH_BYTES  # a 2**30 window: answers' DATA handed back per MiB
        conn.flush()
        self.conn = conn
        return conn

    def _limit(self, conn: Connection) -> int:
        if not conn.settings_seen:
            return 1
        return max(1, min(self.streams, conn.peer_max or self.streams))

    def _take_slot(self, conn: Connection) -> bool:
        """Wait (this lane only) until the connection has room for one more stream; whether it waited."""
        if not self._shared:
            return False  # one lane: its previous stream has left the connection, there is room
        waited = False
        while conn.usable() and (len(conn.streams) >= self._limit(conn) or conn.slot_waiters):
            if self._event is None:
                return False  # one request at a time: there is always room
            waited = True
            wake = self._event()
            conn.slot_waiters.append(wake)
            try:
                wake.wait(self.timeout_s)
            finally:
                with contextlib.suppress(ValueError):
                    conn.slot_waiters.remove(wake)
            if not wake.is_set():
                raise TimeoutError("timed out waiting for a stream slot")
            if len(conn.streams) < self._limit(conn):
                return True
        return waited

    def _wake_slot(self, conn: Connection, everyone: bool = False) -> None:
        """Wake as many lanes waiting for a stream as the connection has room for (all: it ended)."""
        room = len(conn.slot_waiters) if everyone else self._limit(conn) - len(conn.streams)
        while conn.slot_waiters and room > 0:
            conn.slot_waiters.popleft().set()
            room -= 1

    # -- one request -------------------------------------------------------------------------

    def request(self, url: str, path: str, method: str = "GET") -> Sample:
        """Send one request on a stream and read its whole answer. Never raises for network errors."""
        sample = Sample(url=url, start_ns=0)
        sample.start_ns = time.perf_counter_ns()
        try:
            try:
                self._exchange(sample, path, method)
            except GoAway as exc:
                if not exc.unprocessed:
                    raise
                # The server ended the connection before this stream: send it again once on a new one.
                sample.reopened = True
                self._exchange(sample, path, method)
        except Exception as exc:  # noqa: BLE001 - every failure becomes data, never a crash
            sample.error = classify_h2(exc) or classify_error(exc)
            sample.error_detail = f"{type(exc).__name__}: {exc}"[:300]
            if self.conn is not None and not isinstance(exc, StreamReset | GoAway | MalformedHeaders):
                self._end(self.conn, exc)  # the connection failed: every lane on it learns so
        if self._goaway_note is not None:
            sample.goaway, self._goaway_note = self._goaway_note, None
        sample.end_ns = time.perf_counter_ns()
        return sample

    def _connection(self, sample: Sample) -> tuple[Connection, bool]:
        """The user's connection, opened by this request when there is none usable: (it, opened)."""
        conn = self.conn
        if conn is not None and conn.usable():
            return conn, False
        with self._opening:
            conn = self.conn
            if conn is not None and conn.usable():
                return conn, False
            if conn is not None:
                self._retire(conn)
            if self._server_closed:
                sample.reopened, self._server_closed = True, False
            return self._open_h2(sample), True

    def _retire(self, conn: Connection) -> None:
        """``conn`` is no longer the user's: closed now when nothing is in flight on it, else by its
        last stream. The server ending it makes the next connection a reopening."""
        if self.conn is conn:
            self.conn = None
            self.sock = None
            if conn.ending is not None and not self.policy.new_connection_per_request:
                self._server_closed = True
        if not conn.streams and not conn.closed:
            self._end(conn, ConnectionClosed("connection closed"))

    def _headers(self, method: str, path: str) -> list:
        """The request's header list, built, normalised and validated once per (method, path) (HPACK
        encodes it each time)."""
        method_path = [(b":method", method.encode("ascii")), (b":path", path.encode("latin-1"))]
        headers = request_headers([*method_path, *self._origin, *self._extra])
        if len(self._header_lists) < 256:
            self._header_lists[(method, path)] = headers
        return headers

    def _exchange(self, sample: Sample, path: str, method: str) -> None:
        """One stream: its request sent, its answer awaited. On a kept connection with room, timed from
        the first byte handed to the socket, the ``jh2`` library's building of the request's frames
        (HPACK encoding, the HEADERS frame) done before, as the HTTP/1.1 client has its request bytes
        ready. A request that opened a connection, waited for a stream slot or is sent again after a
        GOAWAY is timed from ``sample.start_ns``, those waits in (as the HTTP/1.1 client's connect and
        handshake are), less the library's building of its frames."""
        headers = self._header_lists.get((method, path)) or self._headers(method, path)
        conn, opened = self._connection(sample)
        waited = self._take_slot(conn)
        if not conn.usable():  # ended while this lane waited for a slot
            raise GoAway(conn.ending[0] if conn.ending else "closed", unprocessed=True)
        stream = Stream(self._event() if self._shared else None)
        if self.keep_body:
            stream.kept = bytearray()
        h2conn = conn.h2
        with conn.write_lock:
            t_build = time.perf_counter_ns()
            stream_id = h2conn.get_next_available_stream_id()
            h2conn.send_headers(stream_id, headers, end_stream=True)
            out = h2conn.data_to_send()
            conn.streams[stream_id] = stream
            t_send = time.perf_counter_ns()
            sent = conn.sock.send(out)  # the whole request almost always; sendall for what is left
            if sent < len(out):
                conn.sock.sendall(out[sent:])
        conn.requests += 1
        sample.streams_in_flight = len(conn.streams)
        try:
            self._await(conn, stream)
        finally:
            if conn.streams.pop(stream_id, None) is not None and self._shared:
                self._wake_slot(conn)
            if self.policy.resume_sessions:  # a matrix sub-arm h2_new@…+ticket: offered by the next one
                self.session = conn.sock.session or self.session  # TLS 1.3 tickets came before the answer
            if not conn.usable() or self.policy.new_connection_per_request or conn is not self.conn:
                self._retire(conn)
        if opened:
            sample.peer_max_streams = conn.peer_max
        if stream.error is not None:
            raise stream.error
        sample.status = stream.status
        sample.body_bytes = stream.body
        _note_headers(sample, stream.headers)
        waits_in = opened or waited or sample.reopened  # the user waited for more than this stream
        t0 = sample.start_ns + (t_send - t_build) if waits_in else t_send
        sample.ttfb_us = _us(t0, stream.t_first)
        sample.ttlb_us = _us(t0, stream.t_last)
        if stream.kept is not None:
            self._body_head = bytes(stream.kept)

    def body_head(self) -> bytes:
        """The first bytes of the last answer's body (with ``keep_body``: the preflight's)."""
        return self._body_head

    # -- reading ------------------------------------------------------------------------------

    def _await(self, conn: Connection, stream: Stream) -> None:
        while not stream.done:
            if conn.reading:
                stream.wake.wait()  # another lane reads; it wakes this one with its answer or its turn
                stream.wake.clear()
                continue
            conn.reading = True
            try:
                self._read_once(conn)
            except BaseException as exc:
                conn.reading = False
                self._end(conn, exc if isinstance(exc, Exception) else ConnectionClosed("interrupted"))
                raise
            conn.reading = False
            if not self._shared:
                continue
            # Hand the reading over to a lane still waiting on this connection.
            for other in conn.streams.values():
                if not other.done and other is not stream and other.wake is not None:
                    other.wake.set()
                    break

    def _read_once(self, conn: Connection) -> None:
        sock = conn.sock
        if self._coop and not (self._tls and sock.pending()):
            sock.wait_readable()
        data = sock.recv(RECV_SIZE)
        now = time.perf_counter_ns()
        if not data:
            if conn.ending is not None:  # the close that follows a GOAWAY
                code, last = conn.ending
                for stream_id, stream in conn.streams.items():
                    if stream_id > last:
                        stream.error = GoAway(code, unprocessed=True)
                        finish_stream(stream, now)
                self._retire(conn)
                self._end(conn, ConnectionClosed(f"connection closed after GOAWAY ({code})"))
                return
            raise ConnectionClosed("connection closed by the server")
        try:
            events = conn.h2.receive_data(data)
        except jh2.exceptions.ProtocolError as exc:
            raise ProtocolError(f"HTTP/2 protocol error: {exc}") from None
        for event in events:
            self._on_event(conn, event, now)
        conn.flush()

    def _on_data(self, conn: Connection, event) -> None:
        stream = conn.streams.get(event.stream_id)
        if stream is not None:
            stream.body += len(event.data)
            if stream.kept is not None and len(stream.kept) < BODY_KEPT_BYTES:
                stream.kept += event.data[: BODY_KEPT_BYTES - len(stream.kept)]
        if event.flow_controlled_length:
            conn.acknowledge(event)

    def _on_event(self, conn: Connection, event, now: int) -> None:
        """One frame's event, handed to its stream (or the connection's state)."""
        streams = conn.streams
        kind = type(event)
        if kind is jh2.events.DataReceived:
            self._on_data(conn, event)
        elif kind is jh2.events.ResponseReceived:  # the answer's header block: checked and read at once
            stream = streams.get(event.stream_id)
            if stream is not None and self._header_check.response(stream, event, now):
                stream.t_first = now
        elif kind in HEADER_EVENTS:  # an informational (1xx) header block, trailers: checked only
            stream = streams.get(event.stream_id)
            if stream is not None:
                self._header_check.passes(stream, event, now)
        elif kind is jh2.events.StreamEnded:
            finish_stream(streams.get(event.stream_id), now)
        elif kind is jh2.events.StreamReset:
            stream = streams.get(event.stream_id)
            if stream is not None:
                stream.error = StreamReset(code_name(event.error_code))
                finish_stream(stream, now)
        elif kind is jh2.events.RemoteSettingsChanged:
            changed = event.changed_settings.get(jh2.settings.SettingCodes.MAX_CONCURRENT_STREAMS)
            if changed is not None:
                conn.peer_max = changed.new_value
            conn.settings_seen = True
            self._wake_slot(conn)
        elif kind is jh2.events.ConnectionTerminated:
            code = code_name(event.error_code)
            last = event.last_stream_id if event.last_stream_id is not None else 0
            conn.ending = (code, last)
            self._goaway_note = code
            for stream_id, stream in streams.items():
                if stream_id > last or event.error_code:
                    stream.error = GoAway(code, unprocessed=stream_id > last)
                    finish_stream(stream, now)
            self._wake_slot(conn, everyone=True)
