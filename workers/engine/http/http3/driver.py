"""One QUIC connection of the HTTP/3 client, driven on its own UDP socket: the ``qh3`` state machines
(``QuicConnection`` and ``H3Connection`` over it, sans-I/O) fed by the client's socket and timers.

The loop is the library's: send what ``datagrams_to_send`` gives, wait on the socket until the
connection's one absolute timer (``get_timer``), then either feed each datagram that came
(``receive_datagram``) or fire the timer (``handle_timer``), hand the QUIC events to the HTTP/3 layer
and the HTTP/3 events to their streams, and send again. Who waits is the lane (a request's greenlet)
that needs an answer; the others sleep on their stream's event until it wakes them, as on HTTP/2
(``workers.engine.http.http2``: leader and followers).

The socket and its waits (the hub under gevent, ``poll`` on plain threads) are ``udp.UdpSocket``'s.

Every datagram is counted at the socket (``QuicFacts``: the bytes QUIC put on the wire, UDP payload),
and its arrival time taken as it is read, before the library parses it: that is the time of any answer
byte it carried. The QUIC version, a Retry and a version negotiation are read from the datagrams'
long headers (``quic.long_header``); the group from the ServerHello (``quic.Connection``); packets
lost and probe timeouts from qh3's own loss recovery (``_core.loss_total``, ``pto_total``).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque

from qh3.h3 import events as h3_events
from qh3.h3.connection import H3Connection
from qh3.quic import events as quic_events

from workers.engine.http.http3 import quic as q
from workers.engine.http.http3.errors import (
    CRYPTO_ERROR,
    NO_APPLICATION_PROTOCOL,
    ALPNRefused,
    GoAway,
    MalformedAnswer,
    QuicClosed,
    QuicNoAnswer,
    StreamReset,
)
from workers.engine.http.http3.state import BODY_KEPT_BYTES, QuicFacts, Stream, read_head
from workers.engine.http.http3.udp import RECHECK, UdpSocket


class Driver:
    """One QUIC connection to ``address`` (the endpoint's pinned address and its UDP port: no name is
    resolved here) on its own connected UDP socket, with HTTP/3 over it."""

    def __init__(
        self,
        address: tuple[str, int],
        settings: q.QuicSettings,
        server_name: str,
        ticket,
        on_ticket,
        hub=None,
    ) -> None:
        self.address = address
        self.quic = q.Connection(
            configuration=settings.configuration(server_name, ticket),
            groups=settings.groups,
            session_ticket_handler=on_ticket,
        )
        self.h3 = H3Connection(self.quic)
        self.facts = QuicFacts(port=address[1])
        self.streams: dict[int, Stream] = {}
        self.reading = False  # a lane is reading for the connection
        self.slot_waiters: deque = deque()
        self.handshake_done = False
        self.answered = False  # a datagram came back
        self.failure: BaseException | None = None  # why the connection can carry nothing more
        self.goaway: int | None = None  # the server's GOAWAY: streams from this id on are not served
        self.early_sent = False
        self._held_at = 0.0
        self.t_open_ns = 0
        self._version: int | None = None
        self._wake_at = 0.0  # when the reading lane's wait ends
        self.udp = UdpSocket(address, hub)

    # -- state ---------------------------------------------------------------------------------

    def usable(self) -> bool:
        return self.failure is None and self.goaway is None

    def start(self) -> None:
        """Begin the handshake (the ClientHello is built now); nothing is sent before ``flush``."""
        self.t_open_ns = time.perf_counter_ns()
        self.quic.connect(self.address, now=self.t_open_ns / 1e9)

    def catch_up(self) -> None:
        """Fire the connection's timer if it passed while nobody waited (a kept connection between
        requests): an idle timeout ends the connection here, before a request is sent on it."""
        timer_at = self.quic.get_timer()
        if timer_at is not None and timer_at <= time.perf_counter_ns() / 1e9 and self.failure is None:
            self.quic.handle_timer(now=time.perf_counter_ns() / 1e9)
            self._events(time.perf_counter_ns())
            self.flush()

    def open_stream(self, headers: list, stream: Stream) -> int:
        stream_id = self.quic.get_next_available_stream_id()
        self.h3.send_headers(stream_id, headers, end_stream=True)
        self.streams[stream_id] = stream
        self.facts.requests += 1
        return stream_id

    # -- sending --------------------------------------------------------------------------------

    def flush(self) -> None:
        """Send every datagram the connection has ready."""
        now_s = time.perf_counter_ns() / 1e9
        facts = self.facts
        for data, _ in self.quic.datagrams_to_send(now=now_s):
            self.udp.send(data)
            facts.datagrams_sent += 1
            facts.bytes_sent += len(data)
            if not self.answered:
                facts.first_flight_datagrams += 1
                facts.first_flight_bytes += len(data)
        if self.udp.waiting:
            self._recheck_if_sooner()

    def _recheck_if_sooner(self) -> None:
        """Another lane sent while the reader waits: if that armed a QUIC timer sooner than the reader
        will wake, wake it to wait again with the new timer (a lost packet is then probed in time)."""
        timer_at = self.quic.get_timer()
        if timer_at is not None and timer_at < self._wake_at:
            self._wake_at = timer_at
            self.udp.recheck()

    # -- waiting and reading ---------------------------------------------------------------------

    def pump(self, deadline_s: float) -> None:
        """Wait for datagrams or the connection's timer, at most until ``deadline_s`` (the
        ``perf_counter`` clock, s), and handle what came: raises ``TimeoutError`` at the deadline."""
        timer_at = self.quic.get_timer()
        if timer_at is not None and self.early_sent and self.answered and not self.handshake_done:
            timer_at = self._hold_early_probe(timer_at)
        wake_at = deadline_s if timer_at is None or timer_at > deadline_s else timer_at
        delay = wake_at - time.perf_counter_ns() / 1e9
        self._wake_at = wake_at
        woke = self.udp.wait(delay) if delay > 0 else False
        if woke:
            self._read()
        elif woke is not RECHECK:
            now_s = time.perf_counter_ns() / 1e9
            if timer_at is not None and now_s >= timer_at:
                self.quic.handle_timer(now=now_s)
                self._events(time.perf_counter_ns())
            elif now_s >= deadline_s:
                if not self.answered:
                    raise QuicNoAnswer(self._no_answer())
                raise TimeoutError("timed out waiting for the answer")
        self.flush()

    def _hold_early_probe(self, timer_at: float) -> float | None:
        """qh3 2.1 arms a probe timeout for the 0-RTT packets in flight before it has 1-RTT keys (RFC 9002
        §6.2.1 says not to), and when it fires building the probe fails ("missing OneRtt packet key")
        and leaves the connection broken ("reserved stream is missing"): seen on about 1 in 300
        ``h3_0rtt`` connections on a busy machine, and on every one whose server flight comes 50 ms
        after its first datagram (tests/workers/test_http3_client.py). So once the server has answered
        (it holds the Initial), a 0-RTT connection does not fire that timer until the handshake
        completes: it waits for the server's datagrams, which the server sends again on its own probe
        timeout. A timer that passed while held is counted in ``probes_held``."""
        if not self._held_at:
            self._held_at = timer_at
        return None

    def _no_answer(self) -> str:
        host, port = self.address
        return (
            f"no answer on UDP {host}:{port} during the QUIC handshake: no QUIC server there, "
            "or UDP is dropped on the way"
        )

    def _read(self) -> None:
        """Every datagram waiting on the socket, each handed to the library as it is read."""
        udp = self.udp
        while (data := udp.recv()) is not None:
            t_ns = time.perf_counter_ns()
            facts = self.facts
            facts.datagrams_received += 1
            facts.bytes_received += len(data)
            self.answered = True
            if self._held_at and t_ns / 1e9 > self._held_at:
                self.facts.probes_held += 1
            self._held_at = 0.0
            if not self.handshake_done and data[0] & 0x80:
                self._note_long_header(data)
            self.quic.receive_datagram(data, self.address, now=t_ns / 1e9)
            self._events(t_ns)

    def _note_long_header(self, data: bytes) -> None:
        found = q.long_header(data)
        if found is None:
            return
        version, kind = found
        if kind == "version_negotiation":
            self.facts.version_negotiation = True
        elif kind == "retry":
            self.facts.retry = True
        else:
            self._version = version

    # -- events ----------------------------------------------------------------------------------

    def _events(self, t_ns: int) -> None:
        quic = self.quic
        h3 = self.h3
        while (event := quic.next_event()) is not None:
            kind = type(event)
            if kind is quic_events.StreamDataReceived or kind is quic_events.StreamReset:
                for h3_event in h3.handle_event(event):
                    self._h3_event(h3_event, t_ns)
            elif kind is quic_events.HandshakeCompleted:
                self._handshake_completed(event, t_ns)
            elif kind is quic_events.ConnectionTerminated:
                self._terminated(event)
        # qh3 reports a close (the server's CONNECTION_CLOSE, or its own on a failed check) as an event
        # only when the connection's draining period ends, three probe timeouts later (seconds during
        # a handshake): its ``_close_event`` says it at once.
        closing = quic._close_event
        if closing is not None and self.failure is None:
            self._terminated(closing)

    def _h3_event(self, event, t_ns: int) -> None:
        kind = type(event)
        stream = self.streams.get(getattr(event, "stream_id", -1))
        if kind is h3_events.DataReceived:
            if stream is None:
                return
            stream.body += len(event.data)
            if stream.kept is not None and len(stream.kept) < BODY_KEPT_BYTES:
                stream.kept += event.data[: BODY_KEPT_BYTES - len(stream.kept)]
            if event.stream_ended:
                self._finish(stream, t_ns)
        elif kind is h3_events.HeadersReceived:
            if stream is None:
                return
            if stream.status is None:  # the answer's head (a second block is its trailers)
                stream.t_first = t_ns
                try:
                    read_head(stream, event.headers)
                except MalformedAnswer as exc:
                    stream.error = exc
                    self._finish(stream, t_ns)
                    return
            if event.stream_ended:
                self._finish(stream, t_ns)
        elif kind is h3_events.StreamReset:
            if stream is not None:
                stream.error = StreamReset(event.error_code)
                self._finish(stream, t_ns)
        elif kind is h3_events.GoawayReceived:
            self.goaway = event.stream_id
            for stream_id, other in self.streams.items():
                if stream_id >= event.stream_id and not other.done:
                    other.error = GoAway(unprocessed=True)
                    self._finish(other, t_ns)
            self.wake_slots(everyone=True)

    def _finish(self, stream: Stream, t_ns: int) -> None:
        stream.t_last = t_ns
        stream.done = True
        if stream.wake is not None:
            stream.wake.set()

    def _handshake_completed(self, event, t_ns: int) -> None:
        self.handshake_done = True
        facts = self.facts
        facts.handshake_us = max(1, (t_ns - self.t_open_ns + 500) // 1000)
        facts.alpn = event.alpn_protocol
        facts.session_resumed = event.session_resumed
        if self.early_sent:
            facts.early_data = "accepted" if event.early_data_accepted else "refused"
        facts.version = q.version_name(self._version)
        facts.group = q.group_name(self.quic.group)
        cipher = self.quic.get_cipher()
        facts.cipher = cipher.name if cipher is not None else None
        facts.handshake_bytes_sent = facts.bytes_sent
        facts.handshake_bytes_received = facts.bytes_received
        if event.alpn_protocol != q.ALPN:
            said = f"it selected {event.alpn_protocol}" if event.alpn_protocol else "it selected no protocol"
            self.fail(
                ALPNRefused(f"the QUIC server does not offer HTTP/3 over ALPN ({said}; h3 offered alone)")
            )

    def _terminated(self, event) -> None:
        code, frame_type, reason = event.error_code, event.frame_type, event.reason_phrase or ""
        tls_alert = frame_type is not None and CRYPTO_ERROR <= code < CRYPTO_ERROR + 0x100
        # The alert for "no protocol in common" (RFC 7301), or a server that says ALPN in its reason
        # (qh3's server ends with handshake_failure, "No common ALPN protocols").
        no_alpn = tls_alert and (code - CRYPTO_ERROR == NO_APPLICATION_PROTOCOL or "ALPN" in reason)
        if no_alpn and not self.handshake_done:
            said = reason or "no_application_protocol"
            exc: BaseException = ALPNRefused(
                f"the QUIC server does not offer HTTP/3 over ALPN (its handshake ended: {said})"
            )
        else:
            exc = QuicClosed(code, frame_type, reason)
        self.fail(exc)

    def fail(self, exc: BaseException) -> None:
        """The connection can carry nothing more: every stream still waiting learns why."""
        if self.failure is None:
            self.failure = exc
            self.facts.end = f"{type(exc).__name__}: {exc}"[:300]
        for stream in self.streams.values():
            if not stream.done:
                stream.error = exc
                stream.done = True
                if stream.wake is not None:
                    stream.wake.set()
        self.wake_slots(everyone=True)

    def wake_slots(self, everyone: bool = False, room: int = 0) -> None:
        waiters = self.slot_waiters
        count = len(waiters) if everyone else room
        while waiters and count > 0:
            waiters.popleft().set()
            count -= 1

    def count_recovery(self) -> None:
        """Packets lost and probe timeouts so far, from qh3's loss recovery (its core's counters)."""
        core = self.quic._core
        if core is not None:
            self.facts.packets_lost = core.loss_total
            self.facts.pto_count = core.pto_total

    # -- the end ---------------------------------------------------------------------------------

    def close(self) -> QuicFacts:
        """Close the connection (CONNECTION_CLOSE sent when it is still open), the socket and the
        watchers; the facts are final."""
        facts = self.facts
        if facts.closed:
            return facts
        if self.failure is None:
            self.fail(QuicClosed(0, None, "closed by the client"))
            # The server's GOAWAY ended it (the client closes it once its streams are done).
            facts.end = "GoAway: the server sent HTTP/3 GOAWAY" if self.goaway is not None else None
        with contextlib.suppress(Exception):
            self.quic.close()
            now_s = time.perf_counter_ns() / 1e9
            for data, _ in self.quic.datagrams_to_send(now=now_s):
                self.udp.send(data)
                facts.datagrams_sent += 1
                facts.bytes_sent += len(data)
        self.count_recovery()
        facts.closed = True
        self.udp.close()
        return facts
