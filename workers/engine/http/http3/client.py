"""The timed client's HTTP/3: one virtual user's QUIC connection(s), with the interface of the HTTP/1.1
and HTTP/2 clients (``request`` returns a ``Sample``: an ``H3Sample``; ``close``; ``connections_opened``;
``keep_body``).

Modes (``H3_ARMS``: the arm's ``ConnectionPolicy`` and whether it sends early data):

* ``h3``: one QUIC connection per user, requests as streams, up to ``streams`` in flight (under
  gevent; one at a time on plain threads). A connection the server ended (idle timeout, GOAWAY,
  CONNECTION_CLOSE) is replaced by the next request (``Sample.reopened``).
* ``h3_new``: a new connection per request with a full handshake (no session offered).
* ``h3_resumed``: a new connection per request offering the session ticket of the user's previous
  connection, as a ticket allowing no early data: a resumption, the request sent after it.
* ``h3_0rtt``: the same ticket as it came (allowing early data), the request sent as 0-RTT early data
  in the first flight. Whether the server took it is on the sample (``early_data``): ``accepted``,
  ``refused`` (the library sent it again after the handshake: a resumed 1-RTT request, never a 0-RTT
  one), ``no_ticket`` (no ticket allowing early data: the user's first connection, or a server that
  gives none). Only ``accepted`` may be counted as 0-RTT (``is_zero_rtt``).

Timing, as on the other clients: a request that opens a connection is timed from its start (socket,
handshake in), less the library's building of its HEADERS frame; on a kept connection from the moment
its frame is built, the encryption and the datagram send in (as TLS's encryption is in the HTTP/1.1
and HTTP/2 clients' sends). TTFB is the arrival of the datagram that carried the answer's head, TTLB
of the one that ended its stream. A new connection's handshake (its one round trip: QUIC has no
separate transport handshake) is in ``tls_handshake_us``, from before the socket exists to the
handshake completing; ``connect_us`` is 0, not None: the connection is counted as opened (the
recorder counts connections by ``connect_us``) and a cost against TCP reads the connect it saves.

Only the endpoint's pinned address is used (``Endpoint.address``, and its port or the one given, e.g.
from the server's ``Alt-Svc``): no name is resolved here. A server without QUIC fails fast and says
why (``errors``): ICMP port unreachable at once, no answer within ``handshake_timeout_s``, no h3 over
ALPN; nothing falls back to TCP.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable

from workers.engine.http.endpoint import ARM_POLICIES, H3_ARM_NAMES, ConnectionPolicy, Endpoint
from workers.engine.http.http1 import USER_AGENT
from workers.engine.http.http3 import quic as q
from workers.engine.http.http3.driver import Driver
from workers.engine.http.http3.errors import GoAway, MalformedAnswer, QuicClosed, StreamReset, classify_h3
from workers.engine.http.http3.state import H3Sample, QuicFacts, Stream
from workers.engine.http.sample import ConnectionClosed, _us, classify_error

MAX_STREAMS = 100  # as HTTP/2's ``h2_streams`` (quic-go's default concurrent streams, too)
HANDSHAKE_TIMEOUT_S = 3.0  # no datagram back in this long: no QUIC there (the first probe resends at 1 s)
EARLY_DATA_ACCEPTED = "accepted"

H3_ARMS: dict[str, tuple[ConnectionPolicy, bool]] = {  # arm -> (connection policy, early data)
    name: (ARM_POLICIES[name][1], ARM_POLICIES[name][1].early_data) for name in H3_ARM_NAMES
}


def is_zero_rtt(sample: H3Sample) -> bool:
    """Whether a request was answered as 0-RTT early data: the server accepted it. A refused one, or
    one sent without a ticket, paid a handshake and must never be counted as 0-RTT."""
    return sample.early_data == EARLY_DATA_ACCEPTED


class H3Client:
    """One virtual user's HTTP/3 connection(s) to one endpoint (``https``)."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: ConnectionPolicy,
        settings: q.QuicSettings,
        *,
        timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
        streams: int = 1,
        early_data: bool = False,
        port: int | None = None,
        handshake_timeout_s: float | None = None,
        on_connection_end: Callable[[QuicFacts], None] | None = None,
        on_connection_open: Callable[[Driver], None] | None = None,
    ) -> None:
        if not endpoint.tls:
            raise ValueError("HTTP/3 needs an https endpoint (QUIC is always encrypted)")
        if early_data and not (policy.new_connection_per_request and policy.resume_sessions):
            raise ValueError("0-RTT early data needs a new, resuming connection per request")
        self.endpoint = endpoint
        self.policy = policy
        self.settings = settings
        self.timeout_s = timeout_s
        self.handshake_timeout_s = min(timeout_s, handshake_timeout_s or HANDSHAKE_TIMEOUT_S)
        self.early_data = early_data
        self.address = (endpoint.address, port or endpoint.port)
        self.on_connection_end = on_connection_end
        self.on_connection_open = on_connection_open  # the arm's tally reads an open one's counters
        # Under gevent (the engine patched ``socket``) waits go to the hub (driver.py); elsewhere they block.
        self._coop = hasattr(socket.socket, "_wait")
        self.streams = max(1, min(streams, MAX_STREAMS)) if self._coop else 1
        self.conn: Driver | None = None
        self.ticket = None  # the newest session ticket the server gave this user
        self.connections_opened = 0
        self._server_closed = False
        self.keep_body = False  # the preflight keeps the first bytes of each answer (``body_head``)
        self._body_head = b""
        self._origin = [
            (b":scheme", b"https"),
            (b":authority", endpoint.host_header.encode("latin-1")),
        ]
        self._extra = [(b"user-agent", USER_AGENT.encode()), (b"accept", b"*/*")] + [
            (name.lower().encode("latin-1"), value.encode("latin-1"))
            for name, value in (headers or {}).items()
        ]
        self._header_lists: dict[tuple[str, str], list] = {}
        # Lanes share a connection only with several streams (h3 under gevent).
        self._shared = self.streams > 1
        if self._coop:
            from gevent import get_hub
            from gevent.event import Event
            from gevent.lock import Semaphore

            self._hub, self._event, self._lock = get_hub(), Event, Semaphore
        else:
            self._hub, self._event, self._lock = None, None, contextlib.nullcontext
        self._opening = self._lock()

    # -- connections ---------------------------------------------------------------------------

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            self._end(conn)

    def _end(self, conn: Driver) -> None:
        """Close ``conn`` (what was in flight on it fails) and hand its facts on, once."""
        if conn.facts.closed:
            return
        if self.conn is conn:
            self.conn = None
        facts = conn.close()
        if self.on_connection_end is not None:
            self.on_connection_end(facts)

    def _on_ticket(self, ticket) -> None:
        self.ticket = ticket

    def _offered_ticket(self):
        if not self.policy.resume_sessions or self.ticket is None:
            return None
        return self.ticket if self.early_data else q.without_early_data(self.ticket)

    def _open(self, sample: H3Sample, headers: list, stream: Stream, deadline_s: float):
        """A new connection, its handshake done (for 0-RTT: the request sent with its first flight):
        (the connection, (stream id, t_build, t_send) when the request was sent)."""
        ticket = self._offered_ticket()
        conn = Driver(self.address, self.settings, self.endpoint.host, ticket, self._on_ticket, self._hub)
        self.connections_opened += 1
        if self.on_connection_open is not None:
            self.on_connection_open(conn)
        sample.connect_us = 0
        sample.quic = conn.facts  # also when it fails: what it sent, whether anything came back
        sent = None
        try:
            conn.start()
            if self.early_data:
                if q.allows_early_data(ticket):
                    t_build = time.perf_counter_ns()
                    stream_id = conn.open_stream(headers, stream)
                    t_send = time.perf_counter_ns()
                    conn.early_sent = True
                    sent = (stream_id, t_build, t_send)
                else:
                    conn.facts.early_data = "no_ticket"
            conn.flush()
            if sent is None:
                self._handshake(conn, deadline_s)
        except BaseException as exc:
            conn.fail(exc if isinstance(exc, Exception) else ConnectionClosed("interrupted"))
            self._end(conn)
            raise
        sample.early_data = conn.facts.early_data
        return conn, sent

    def _handshake(self, conn: Driver, deadline_s: float) -> None:
        answer_by = conn.t_open_ns / 1e9 + self.handshake_timeout_s
        while not conn.handshake_done and conn.failure is None:
            conn.pump(deadline_s if conn.answered else min(deadline_s, answer_by))
        if conn.failure is not None:
            raise conn.failure

    def _connection(self, sample: H3Sample, headers: list, stream: Stream, deadline_s: float):
        """The user's connection, opened by this request when there is none usable: (it, opened, sent)."""
        conn = self.conn
        if conn is not None and not conn.reading:
            conn.catch_up()
        if conn is not None and conn.usable():
            return conn, False, None
        with self._opening:
            conn = self.conn
            if conn is not None and conn.usable():
                return conn, False, None
            if conn is not None:
                self._retire(conn)
            if self._server_closed:
                sample.reopened, self._server_closed = True, False
            conn, sent = self._open(sample, headers, stream, deadline_s)
            self.conn = conn
            return conn, True, sent

    def _retire(self, conn: Driver) -> None:
        """``conn`` is no longer the user's: closed now when nothing is in flight on it, else by its last
        stream. The server ending it makes the next connection a reopening (keep-alive)."""
        if self.conn is conn:
            self.conn = None
            if conn.goaway is not None or isinstance(conn.failure, QuicClosed):
                self._server_closed = not self.policy.new_connection_per_request
        if not conn.streams:
            self._end(conn)

    def _take_slot(self, conn: Driver, deadline_s: float) -> bool:
        """Wait (this lane only) until the connection has room for one more stream; whether it waited."""
        waited = False
        while conn.usable() and (len(conn.streams) >= self.streams or conn.slot_waiters):
            if self._event is None:
                return False
            waited = True
            wake = self._event()
            conn.slot_waiters.append(wake)
            try:
                wake.wait(max(0.0, deadline_s - time.perf_counter_ns() / 1e9))
            finally:
                with contextlib.suppress(ValueError):
                    conn.slot_waiters.remove(wake)
            if not wake.is_set():
                raise TimeoutError("timed out waiting for a stream slot")
            if len(conn.streams) < self.streams:
                return True
        return waited

    # -- one request -----------------------------------------------------------------------------

    def request(self, url: str, path: str, method: str = "GET") -> H3Sample:
        """Send one request on a stream and read its whole answer. Never raises for network errors."""
        sample = H3Sample(url=url, start_ns=0)
        sample.start_ns = time.perf_counter_ns()
        try:
            try:
                self._exchange(sample, path, method)
            except GoAway as exc:
                if not exc.unprocessed:
                    raise
                sample.reopened = True  # the server ended the connection before this stream: once more
                self._exchange(sample, path, method)
        except Exception as exc:  # noqa: BLE001 - every failure becomes data, never a crash
            sample.error = classify_h3(exc) or classify_error(exc)
            sample.error_detail = f"{type(exc).__name__}: {exc}"[:300]
            conn = self.conn
            if conn is not None and not isinstance(exc, StreamReset | GoAway | MalformedAnswer):
                conn.fail(exc)  # the connection failed: every lane on it learns so
                self._retire(conn)
        sample.end_ns = time.perf_counter_ns()
        return sample

    def _headers(self, method: str, path: str) -> list:
        method_path = [(b":method", method.encode("ascii")), (b":path", path.encode("latin-1"))]
        headers = [*method_path, *self._origin, *self._extra]
        if len(self._header_lists) < 256:
            self._header_lists[(method, path)] = headers
        return headers

    def _exchange(self, sample: H3Sample, path: str, method: str) -> None:
        headers = self._header_lists.get((method, path)) or self._headers(method, path)
        deadline_s = sample.start_ns / 1e9 + self.timeout_s
        stream = Stream(self._event() if self._shared else None)
        if self.keep_body:
            stream.kept = bytearray()
        conn, opened, sent = self._connection(sample, headers, stream, deadline_s)
        waited = False
        if sent is None:
            waited = self._take_slot(conn, deadline_s)
            if not conn.usable():  # ended while this lane waited for a slot
                raise conn.failure if conn.goaway is None else GoAway(unprocessed=True)
            t_build = time.perf_counter_ns()
            stream_id = conn.open_stream(headers, stream)
            t_send = time.perf_counter_ns()
            conn.flush()
        else:
            stream_id, t_build, t_send = sent
        sample.streams_in_flight = len(conn.streams)
        try:
            self._await(conn, stream, deadline_s)
        finally:
            if conn.streams.pop(stream_id, None) is not None and self._shared:
                conn.wake_slots(room=self.streams - len(conn.streams))
            if self.policy.new_connection_per_request or not conn.usable() or conn is not self.conn:
                self._retire(conn)
        if opened:
            sample.tls_handshake_us = conn.facts.handshake_us
            sample.session_reused = conn.facts.session_resumed
            sample.alpn = conn.facts.alpn
            sample.early_data = conn.facts.early_data
        if stream.error is not None:
            raise stream.error
        sample.status = stream.status
        sample.body_bytes = stream.body
        noted = stream.headers
        sample.location, sample.server = noted.get("location"), noted.get("server")
        sample.content_type = noted.get("content-type", "")
        sample.content_encoding = noted.get("content-encoding", "")
        waits_in = opened or waited or sample.reopened
        t0 = sample.start_ns + (t_send - t_build) if waits_in else t_send
        sample.ttfb_us = _us(t0, stream.t_first)
        sample.ttlb_us = _us(t0, stream.t_last)
        if stream.kept is not None:
            self._body_head = bytes(stream.kept)

    def body_head(self) -> bytes:
        """The first bytes of the last answer's body (with ``keep_body``: the preflight's)."""
        return self._body_head

    # -- reading ---------------------------------------------------------------------------------

    def _await(self, conn: Driver, stream: Stream, deadline_s: float) -> None:
        while not stream.done:
            if conn.reading:
                stream.wake.wait()  # another lane reads; it wakes this one with its answer or its turn
                stream.wake.clear()
                continue
            conn.reading = True
            try:
                conn.pump(deadline_s if conn.answered else min(deadline_s, self._answer_by(conn)))
            except BaseException as exc:
                conn.reading = False
                conn.fail(exc if isinstance(exc, Exception) else ConnectionClosed("interrupted"))
                raise
            conn.reading = False
            if not self._shared:
                continue
            for other in conn.streams.values():  # hand the reading over to a lane still waiting
                if not other.done and other is not stream and other.wake is not None:
                    other.wake.set()
                    break

    def _answer_by(self, conn: Driver) -> float:
        return conn.t_open_ns / 1e9 + self.handshake_timeout_s
