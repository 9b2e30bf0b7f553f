"""The reference for the HTTP/3 client's own overhead (issue 34, for ``bench/client_paired``): the same
library (qh3), the same per-connection configuration (``workers.engine.http.http3.quic``: ALPN h3, groups,
tickets) and the same timing boundaries as ``workers.engine.http.http3.client.H3Client``, driven by the
smallest loop that works: a blocking UDP socket with a timeout, one request at a time, no facts kept,
no lanes (it measures what the library costs, not what the client adds). Like the client it does not
fire qh3's probe timeout while a 0-RTT handshake waits for its keys (``Driver._hold_early_probe``).

    with BlockingH3(port) as ref:
        status, size, ttlb_us = ref.request("/1k")             # a kept connection (h3)
        status, size, ttlb_us = ref.request("/1k", new=True)   # a connection per request (h3_new)

``resume=True`` offers the previous connection's ticket (``h3_resumed``), ``early_data=True`` sends
the request with the first flight when the ticket allows it (``h3_0rtt``). In a gevent-patched process
pass the unpatched ``socket.socket`` class (``socket_cls``), as ``bench/blocking.py``'s callers do.
"""

from __future__ import annotations

import socket
import time
from types import TracebackType

from qh3.h3 import events as h3_events
from qh3.h3.connection import H3Connection
from qh3.quic import events as quic_events

from workers.engine.http.http3 import quic as q


class BlockingH3:
    def __init__(
        self,
        port: int,
        host: str = "127.0.0.1",
        *,
        settings: q.QuicSettings | None = None,
        resume: bool = False,
        early_data: bool = False,
        timeout_s: float = 10.0,
        socket_cls: type = socket.socket,
    ) -> None:
        self.address = (host, port)
        self.settings = settings or q.make_settings(False)
        self.resume, self.early_data = resume, early_data
        self.timeout_s = timeout_s
        self.socket_cls = socket_cls
        self.ticket = None
        self._conn = None  # (socket, QuicConnection, H3Connection) of the kept connection
        self._headers: dict[str, list] = {}
        self._streams: dict[int, dict] = {}
        self._state = {"handshake": False, "answered": False, "early": False}

    def __enter__(self) -> BlockingH3:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _on_ticket(self, ticket) -> None:
        self.ticket = ticket

    def _open(self):
        ticket = None
        if self.resume and self.ticket is not None:
            ticket = self.ticket if self.early_data else q.without_early_data(self.ticket)
        config = self.settings.configuration(self.address[0], ticket)
        quic = q.Connection(
            configuration=config, groups=self.settings.groups, session_ticket_handler=self._on_ticket
        )
        h3 = H3Connection(quic)
        sock = self.socket_cls(socket.AF_INET, socket.SOCK_DGRAM)
        sock.connect(self.address)
        quic.connect(self.address, now=time.perf_counter())
        early = q.allows_early_data(ticket) and self.early_data
        self._state = {"handshake": False, "answered": False, "early": early}
        return sock, quic, h3, early

    def _headers_of(self, path: str) -> list:
        headers = self._headers.get(path)
        if headers is None:
            authority = f"{self.address[0]}:{self.address[1]}".encode()
            headers = self._headers[path] = [
                (b":method", b"GET"),
                (b":path", path.encode()),
                (b":scheme", b"https"),
                (b":authority", authority),
                (b"user-agent", b"tollgate/0.1"),
                (b"accept", b"*/*"),
            ]
        return headers

    def request(self, path: str, new: bool = False) -> tuple[int, int, int]:
        """(status, body bytes, TTLB µs) of one GET; ``new``: on a connection of its own, timed from
        before its socket exists (the handshake in), else on the kept connection from the send."""
        t_start = time.perf_counter_ns()
        conn = None if new else self._conn
        opened = conn is None
        if opened:
            conn = self._open()
            if not new:
                self._conn = conn
        sock, quic, h3, early = conn
        if opened and not early:
            self._until(conn, lambda: self._state["handshake"])
        stream_id = quic.get_next_available_stream_id()
        h3.send_headers(stream_id, self._headers_of(path), end_stream=True)
        t0 = t_start if opened else time.perf_counter_ns()
        answer = {"status": 0, "size": 0, "done": False, "t_last": 0}
        self._streams = {stream_id: answer}
        self._until(conn, lambda: answer["done"])
        if new:
            self._close(conn)
        return answer["status"], answer["size"], max(1, (answer["t_last"] - t0 + 500) // 1000)

    def _until(self, conn, done) -> None:
        sock, quic, h3, _ = conn
        deadline = time.perf_counter() + self.timeout_s
        while not done():
            for data, _ in quic.datagrams_to_send(now=time.perf_counter()):
                sock.send(data)
            now = time.perf_counter()
            if now > deadline:
                raise TimeoutError("no answer from the HTTP/3 server")
            timer = quic.get_timer()
            state = self._state
            if state["early"] and state["answered"] and not state["handshake"]:
                timer = None  # qh3's early probe: not fired (see the module's docstring)
            delay = min(deadline, timer if timer is not None else deadline) - now
            if delay <= 0:
                quic.handle_timer(now=now)
            else:
                sock.settimeout(delay)
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    quic.handle_timer(now=time.perf_counter())
                else:
                    t_ns = time.perf_counter_ns()
                    self._state["answered"] = True
                    quic.receive_datagram(data, self.address, now=t_ns / 1e9)
                    self._events(quic, h3, t_ns)
                    continue
            self._events(quic, h3, time.perf_counter_ns())
        for data, _ in quic.datagrams_to_send(now=time.perf_counter()):  # the ACKs it owes, as the client
            sock.send(data)

    def _events(self, quic, h3, t_ns: int) -> None:
        while (event := quic.next_event()) is not None:
            if isinstance(event, quic_events.ConnectionTerminated):
                raise ConnectionError(f"the QUIC connection was closed: {event.reason_phrase}")
            if isinstance(event, quic_events.HandshakeCompleted):
                self._state["handshake"] = True
            for h3_event in h3.handle_event(event):
                answer = self._streams.get(getattr(h3_event, "stream_id", -1))
                if answer is None:
                    continue
                if isinstance(h3_event, h3_events.HeadersReceived):
                    answer["status"] = int(dict(h3_event.headers)[b":status"])
                elif isinstance(h3_event, h3_events.DataReceived):
                    answer["size"] += len(h3_event.data)
                if getattr(h3_event, "stream_ended", False):
                    answer["done"], answer["t_last"] = True, t_ns

    def _close(self, conn) -> None:
        sock, quic, _, _ = conn
        quic.close()
        for data, _ in quic.datagrams_to_send(now=time.perf_counter()):
            sock.send(data)
        sock.close()

    def close(self) -> None:
        if self._conn is not None:
            self._close(self._conn)
            self._conn = None
