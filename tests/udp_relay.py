"""A UDP relay on loopback for the HTTP/3 tests: clients send to ``port``, it forwards each client's
datagrams to ``target`` from a socket of that client's own (so the server's answers find their way
back) and counts what passed, both ways. It can drop every Nth datagram (each direction counted apart),
and hold a flow's server datagrams after its first one for a while (a server whose first packet comes
at once and the rest of its flight late). With ``alternate``, a second server, each new flow (a new
client socket: a new QUIC connection) goes to the other server than the flow before it: a session
ticket one server issued is then offered to the other, which cannot open it.

    with UdpRelay(("127.0.0.1", caddy.tls_port), drop_every=5) as relay:
        ... https://127.0.0.1:{relay.port}/ over QUIC ...
        relay.dropped, relay.bytes_from_client
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import select
import socket
import threading
import time
from types import TracebackType

TO_SERVER, TO_CLIENT = "to_server", "to_client"


class UdpRelay:
    def __init__(
        self,
        target: tuple[str, int],
        *,
        drop_every: int = 0,
        hold_after_first_s: float = 0.0,
        alternate: tuple[str, int] | None = None,
    ) -> None:
        self.target = target
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
        self._held: list = []  # (due, seq, data, client)
        self._seq = itertools.count()
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

    def _run(self) -> None:
        while not self._stop.is_set():
            timeout = 0.05
            if self._held:
                timeout = max(0.0, min(timeout, self._held[0][0] - time.monotonic()))
            self._relay(timeout)

    def _relay(self, timeout: float) -> bool:
        """Relay what is readable within ``timeout``; whether anything was."""
        readable, _, _ = select.select([self._front, *self._flows.values()], [], [], timeout)
        for sock in readable:
            if sock is self._front:
                self._from_client()
            else:
                self._from_server(sock)
        now = time.monotonic()
        while self._held and self._held[0][0] <= now:
            _, _, data, client = heapq.heappop(self._held)
            self._to_client(data, client)
        return bool(readable)

    def _from_client(self) -> None:
        data, client = self._front.recvfrom(65536)
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
            self._flows[client] = upstream
            self._clients[upstream.fileno()] = client
        if self._drops(TO_SERVER):
            return
        self.forwarded[TO_SERVER] += 1
        with contextlib.suppress(OSError):  # nothing listens there: the client hears nothing
            upstream.send(data)

    def _from_server(self, upstream: socket.socket) -> None:
        try:
            data = upstream.recv(65536)
        except OSError:
            return
        client = self._clients[upstream.fileno()]
        if self._drops(TO_CLIENT):
            return
        if self.hold_after_first_s and client in self._answered:
            heapq.heappush(
                self._held, (time.monotonic() + self.hold_after_first_s, next(self._seq), data, client)
            )
            return
        self._answered.add(client)
        self._to_client(data, client)

    def _to_client(self, data: bytes, client: tuple) -> None:
        self.forwarded[TO_CLIENT] += 1
        self._front.sendto(data, client)
