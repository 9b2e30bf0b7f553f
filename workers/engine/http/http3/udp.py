"""One QUIC connection's UDP socket and its waits: a connected, non-blocking C socket to the pinned
address, and a wait for "a datagram came" or "the delay passed".

Under gevent (the engine) a wait is one read watcher and one timer on the hub, as ``coop.py`` waits for
TCP: no gevent socket wrapper, no ``Timeout`` object. gevent's libev timer cannot be re-armed with
another delay, and a QUIC timer moves with every packet, so each wait makes its one timer (about
0.6 µs; re-arming a fixed one costs 0.3 µs). On plain threads (tests, the blocking reference) the same
socket waits in ``poll``. Connected, the socket hears the host's ICMP port unreachable: the next send
or read raises ``QuicRefused`` (nothing listens on that UDP port).
"""

from __future__ import annotations

import _socket
import math
import select
import socket

from gevent.hub import Waiter

from workers.engine.http.http3.errors import QuicRefused

RECV_SIZE = 65536
_DGRAM_NONBLOCK = socket.SOCK_DGRAM | socket.SOCK_NONBLOCK
READ, WRITE = 1, 2  # libev's EV_READ, EV_WRITE (coop.py)
RECHECK = None  # what a wait returns when it was cut short to wait again (``recheck``)


class UdpSocket:
    """A UDP socket connected to ``address``; ``hub``: gevent's (the engine), or None (plain threads)."""

    __slots__ = ("address", "sock", "_hub", "_reader", "_writer", "_poll", "_waiter")

    def __init__(self, address: tuple[str, int], hub=None) -> None:
        self.address = address
        self._hub = hub
        self._reader = self._writer = self._poll = self._waiter = None
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.sock = _socket.socket(family, _DGRAM_NONBLOCK)
        try:
            self.sock.connect(address)  # an IP literal: no name is resolved
            if hub is not None:
                self._reader = hub.loop.io(self.sock.fileno(), READ)
            else:
                self._poll = select.poll()
                self._poll.register(self.sock.fileno(), select.POLLIN)
        except BaseException:
            self.sock.close()
            raise

    def refused(self) -> QuicRefused:
        host, port = self.address
        return QuicRefused(
            111, f"nothing listens on UDP {host}:{port} (ICMP port unreachable): no QUIC server there"
        )

    def send(self, data: bytes) -> None:
        while True:
            try:
                self.sock.send(data)
                return
            except BlockingIOError:
                self._wait_writable()
            except ConnectionRefusedError:
                raise self.refused() from None

    def _wait_writable(self) -> None:
        if self._hub is None:
            poll = select.poll()
            poll.register(self.sock.fileno(), select.POLLOUT)
            poll.poll(1000)
            return
        if self._writer is None:
            self._writer = self._hub.loop.io(self.sock.fileno(), WRITE)
        self._hub.wait(self._writer)

    def recv(self) -> bytes | None:
        """The next datagram waiting, or None when none is."""
        try:
            return self.sock.recv(RECV_SIZE)
        except BlockingIOError:
            return None
        except ConnectionRefusedError:
            raise self.refused() from None

    def wait(self, delay: float):
        """True: a datagram (or an ICMP error) is there to read; False: ``delay`` s passed;
        ``RECHECK``: another greenlet cut the wait short (``recheck``)."""
        if self._hub is None:
            return bool(self._poll.poll(max(1, math.ceil(delay * 1000))))
        hub = self._hub
        waiter = Waiter(hub)
        timer = hub.loop.timer(delay)
        self._reader.start(waiter.switch, True)
        timer.start(waiter.switch, False)
        self._waiter = waiter
        try:
            return waiter.get()
        finally:
            self._waiter = None
            self._reader.stop()
            timer.stop()
            timer.close()

    @property
    def waiting(self) -> bool:
        return self._waiter is not None

    def recheck(self) -> None:
        """Cut the current wait short (from another greenlet), so its waiter waits again with a new
        delay; the hub delivers it, as a watcher's callback would."""
        if self._waiter is not None:
            self._hub.loop.run_callback(self._waiter.switch, RECHECK)

    def close(self) -> None:
        for watcher in (self._reader, self._writer):
            if watcher is not None:
                watcher.stop()
                watcher.close()
        self._reader = self._writer = None
        self.sock.close()
