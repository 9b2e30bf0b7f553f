"""A UDP relay on loopback for the HTTP/3 tests: clients send to ``port``, it forwards each client's
datagrams to ``target`` from a socket of that client's own (so the server's answers find their way
back) and counts what passed, both ways. It can drop every Nth datagram (each direction counted apart),
hold a flow's server datagrams after its first one for a while (a server whose first packet comes
at once and the rest of its flight late), and delay every datagram by ``delay_ms`` one way (both
directions, so a round trip costs 2 × ``delay_ms``: a WAN for QUIC, ``tests/workers/test_wan_relay_quic.py``).
The delay runs from when the kernel received the datagram (``SO_TIMESTAMPNS``, as in
``tests/delay_relay.py``), the datagrams leave in the order they came (one due time per datagram, the
same delay for all) and at most ``MAX_QUEUED`` wait at once (beyond that one is dropped and counted in
``overflowed``: bounded memory, never unbounded buffering). As that relay's writers, it wakes for a
datagram's due time less the median of its recent oversleeps (at most 1 ms early), so its own
wake-ups add little to each hop. With ``alternate``, a second server, each new flow (a new client
socket: a new QUIC connection) goes to the other server than the flow before it: a session
ticket one server issued is then offered to the other, which cannot open it.

    with UdpRelay(("127.0.0.1", caddy.tls_port), drop_every=5) as relay:
        ... https://127.0.0.1:{relay.port}/ over QUIC ...
        relay.dropped, relay.bytes_from_client

    with UdpRelay(("127.0.0.1", caddy.tls_port), delay_ms=10) as relay:  # 20 ms RTT
        ...
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import select
import socket
import statistics
import threading
import time
from collections import deque
from types import TracebackType

from tests.delay_relay import CMSG_SPACE, MAX_EARLY_S, OVERSLEEPS_KEPT, SO_TIMESTAMPNS, _arrival

TO_SERVER, TO_CLIENT = "to_server", "to_client"
MAX_DELAY_MS = 1000.0
MAX_QUEUED = 4096


class UdpRelay:
    def __init__(
        self,
        target: tuple[str, int],
        *,
        drop_every: int = 0,
        hold_after_first_s: float = 0.0,
        alternate: tuple[str, int] | None = None,
        delay_ms: float = 0.0,
    ) -> None:
        if not 0 <= delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"a one-way delay within 0-{MAX_DELAY_MS:g} ms, not {delay_ms!r}")
        self.target = target
        self.delay_s = delay_ms / 1000.0
        self.overflowed = 0  # datagrams dropped because MAX_QUEUED were already waiting
        self.alternate = alternate
        self.flows_to = {target: 0, **({alternate: 0} if alternate else {})}  # new flows per server
        self.drop_every = drop_every
        self.hold_after_first_s = hold_after_first_s
        self.port = 0
        self.forwarded = {TO_SERVER: 0, TO_CLIENT: 0}
        self.dropped = {TO_SERVER: 0, TO_CLIENT: 0}
        self.bytes_from_client = 0  # every datagram a client sent, dropped or not: what left its socket
        self.datagrams_from_client = 0
        self._seen = {TO_SERVER: 0, TO_CLIENT: 0}
        self._front: socket.socket | None = None
        self._flows: dict[tuple, socket.socket] = {}  # client address -> its socket to the server
        self._clients: dict[int, tuple] = {}  # that socket's fileno -> the client address
        self._answered: set[tuple] = set()  # flows whose first server datagram went through
        self._held: list = []  # (due, seq, data, destination socket, address or None)
        self._seq = itertools.count()
        self._oversleeps_s: deque[float] = deque([0.0], maxlen=OVERSLEEPS_KEPT)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> UdpRelay:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> UdpRelay:
        self._front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._front.bind(("127.0.0.1", 0))
        if self.delay_s:
            self._front.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.port = self._front.getsockname()[1]
        self._thread = threading.Thread(target=self._run, name="udp-relay", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
            for _ in range(100):  # what was sent before the stop (a client's last close) is counted
                if not self._relay(0):
                    break
        for sock in [self._front, *self._flows.values()]:
            if sock is not None:
                sock.close()

    def _drops(self, direction: str) -> bool:
        self._seen[direction] += 1
        if self.drop_every and self._seen[direction] % self.drop_every == 0:
            self.dropped[direction] += 1
            return True
        return False

    def _early_s(self) -> float:
        return min(MAX_EARLY_S, statistics.median(self._oversleeps_s))

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = 0.05
            if self._held:
                timeout = max(0.0, min(timeout, self._held[0][0] - self._early_s() - time.monotonic()))
            self._relay(timeout)

    def _relay(self, timeout: float) -> bool:
        """Relay what is readable within ``timeout``; whether anything was."""
        target = time.monotonic() + timeout
        readable, _, _ = select.select([self._front, *self._flows.values()], [], [], timeout)
        if not readable and timeout > 0 and self._held:  # woke for a held datagram: how late
            self._oversleeps_s.append(max(0.0, time.monotonic() - target))
        for sock in readable:
            if sock is self._front:
                self._from_client()
            else:
                self._from_server(sock)
        now = time.monotonic() + self._early_s()
        while self._held and self._held[0][0] <= now:
            _, _, data, sock, address = heapq.heappop(self._held)
            if sock is self._front:
                self._to_client(data, address)
            else:
                with contextlib.suppress(OSError):  # nothing listens there: the client hears nothing
                    sock.send(data)
        return bool(readable)

    def _receive(self, sock: socket.socket) -> tuple[bytes, tuple, float]:
        """A datagram, its sender and when the kernel received it (on ``time.monotonic``'s clock)."""
        data, ancillary, _, address = sock.recvmsg(65536, CMSG_SPACE)
        return data, address, _arrival(ancillary)

    def _later(self, due: float, data: bytes, sock: socket.socket, address: tuple | None) -> bool:
        """Queue ``data`` for ``sock`` at ``due``; False (and counted) when the queue is full."""
        if len(self._held) >= MAX_QUEUED:
            self.overflowed += 1
            return False
        heapq.heappush(self._held, (due, next(self._seq), data, sock, address))
        return True

    def _from_client(self) -> None:
        data, client, arrived = self._receive(self._front)
        self.datagrams_from_client += 1
        self.bytes_from_client += len(data)
        upstream = self._flows.get(client)
        if upstream is None:
            upstream = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            target = self.target
            if self.alternate is not None and len(self._flows) % 2:
                target = self.alternate
            self.flows_to[target] += 1
            upstream.connect(target)
            if self.delay_s:
                upstream.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            self._flows[client] = upstream
            self._clients[upstream.fileno()] = client
        if self._drops(TO_SERVER):
            return
        if self.delay_s:
            if self._later(arrived + self.delay_s, data, upstream, None):
                self.forwarded[TO_SERVER] += 1
            return
        self.forwarded[TO_SERVER] += 1
        with contextlib.suppress(OSError):  # nothing listens there: the client hears nothing
            upstream.send(data)

    def _from_server(self, upstream: socket.socket) -> None:
        try:
            data, _, arrived = self._receive(upstream)
        except OSError:
            return
        client = self._clients[upstream.fileno()]
        if self._drops(TO_CLIENT):
            return
        hold_s = self.hold_after_first_s if client in self._answered else 0.0
        self._answered.add(client)
        if hold_s or self.delay_s:
            self._later(arrived + self.delay_s + hold_s, data, self._front, client)
            return
        self._to_client(data, client)

    def _to_client(self, data: bytes, client: tuple) -> None:
        self.forwarded[TO_CLIENT] += 1
        self._front.sendto(data, client)
