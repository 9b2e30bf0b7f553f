"""A TCP relay on loopback that delays every byte by half a round-trip time in each direction: a WAN
for machines whose kernel has no ``tc netem`` (``tests/workers/test_wan_relay.py``).

``DelayRelay(port, rtt_ms)`` listens on 127.0.0.1 (a free port, ``relay.port``) and relays each
connection it accepts to 127.0.0.1:``port``. Every chunk read from one side is written to the other
side RTT/2 after it arrived, in order: each direction has a queue of ``(due time, bytes)`` and a
writer that sleeps only until the head's due time, so a burst is not serialised by sleeps and
throughput is not limited by the delay. A request and its answer thus cost one RTT, as on a WAN.

A chunk's delay runs from when the kernel received it (``SO_TIMESTAMPNS``), not from when a relay
thread woke up to read it, and a writer sleeps until the due time less its typical oversleep: the
relay's own wake-ups add little (~0.1–0.3 ms per round trip here, more on a busy machine).

What it cannot delay, it emulates and says so: the relay's kernel completes the client's TCP
handshake at once (a userspace relay never sees SYN and SYN-ACK), so a connection's first bytes
from the client (and all after them) are held one RTT more, as if they had left after the SYN/SYN-ACK
round trip a client far away waits before it may send. Since the relay terminates TCP on both
sides, nothing of TCP's own behaviour over a long path (initial congestion window, slow start,
delayed ACKs, loss) is emulated: only the delay of each byte.

Only loopback: it binds 127.0.0.1 and connects to 127.0.0.1. Threads are daemons; ``stop()`` (or
leaving the ``with`` block) closes every socket it opened and joins its threads.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import statistics
import struct
import threading
import time
from collections import deque

LOOPBACK = "127.0.0.1"
RECV_BYTES = 65536
JOIN_TIMEOUT_S = 5.0
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)  # Linux's value where Python lacks the name
CMSG_SPACE = socket.CMSG_SPACE(16)  # one struct timespec
MAX_EARLY_S = 0.001
OVERSLEEPS_KEPT = 31


def _prepare(sock: socket.socket) -> None:
    sock.settimeout(None)
    # A delayed chunk must leave as soon as it is due, not wait for Nagle.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # The kernel's receive time of each chunk, so the relay's own wake-up is not added to the delay.
    sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)


def _arrival(ancillary: list) -> float:
    """When the kernel received the chunk, on ``time.monotonic``'s clock (now, without a stamp)."""
    now_mono, now_real = time.monotonic(), time.time()
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= 16:
            seconds, nanoseconds = struct.unpack("qq", data[:16])
            age_s = now_real - (seconds + nanoseconds / 1e9)
            if 0 <= age_s < 1:
                return now_mono - age_s
    return now_mono


def _read(src: socket.socket, chunks: queue.Queue, delay_s: float, hold_s: float = 0.0) -> None:
    """Queue each chunk read from ``src`` with its due time; ``None`` at end of stream (or error).
    ``hold_s``: nothing is due before the first chunk's arrival + ``hold_s`` (TCP's handshake)."""
    not_before = None
    while True:
        try:
            data, ancillary, _, _ = src.recvmsg(RECV_BYTES, CMSG_SPACE)
            arrived = _arrival(ancillary)
        except OSError:
            data, arrived = b"", time.monotonic()
        if not_before is None:
            not_before = arrived + hold_s
        chunks.put((max(arrived, not_before) + delay_s, data or None))
        if not data:
            return


class _Sleeper:
    """Sleeps until a due time, on time at the median: a sleeping thread wakes some 0.1–0.2 ms late
    here (more on a busy machine), which would otherwise add to every hop, so it sleeps until the due
    time less the median of the relay's recent oversleeps (at most ``MAX_EARLY_S``). It never spins:
    a spinning thread would hold the GIL the relay's other threads wait for."""

    def __init__(self) -> None:
        self.oversleeps_s: deque[float] = deque([0.0], maxlen=OVERSLEEPS_KEPT)
        self.lock = threading.Lock()  # shared by a relay's writers

    def until(self, due: float) -> None:
        with self.lock:
            target = due - min(MAX_EARLY_S, statistics.median(self.oversleeps_s))
        wait_s = target - time.monotonic()
        if wait_s > 0:
            time.sleep(wait_s)
            with self.lock:
                self.oversleeps_s.append(max(0.0, time.monotonic() - target))


def _write(dst: socket.socket, chunks: queue.Queue, sleeper: _Sleeper) -> None:
    """Write each chunk to ``dst`` when it is due, in order; pass the end of stream on as a FIN."""
    while True:
        due, data = chunks.get()
        sleeper.until(due)
        try:
            if data is None:
                dst.shutdown(socket.SHUT_WR)
                return
            dst.sendall(data)
        except OSError:
            return


class DelayRelay:
    """127.0.0.1:``self.port`` → 127.0.0.1:``target_port``, each byte delayed RTT/2 each way."""

    def __init__(self, target_port: int, rtt_ms: float, *, emulate_tcp_handshake: bool = True) -> None:
        if rtt_ms < 0:
            raise ValueError("an RTT is not negative")
        self.target_port = target_port
        self.rtt_s = rtt_ms / 1000.0
        self.emulate_tcp_handshake = emulate_tcp_handshake
        self.connections = 0
        self._listener = socket.create_server((LOOPBACK, 0), backlog=128)
        self._listener.settimeout(0.1)
        # Set here too: a chunk that arrives before accept() returns gets its stamp on arrival.
        self._listener.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        self.port = self._listener.getsockname()[1]
        self._sleeper = _Sleeper()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="delay-relay", daemon=True)

    def __enter__(self) -> DelayRelay:
        self._acceptor.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def url(self, scheme: str, path: str = "/1k") -> str:
        return f"{scheme}://{LOOPBACK}:{self.port}{path}"

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection((LOOPBACK, self.target_port), timeout=5)
            except OSError:
                client.close()
                continue
            self._relay(client, upstream)

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        for sock in (client, upstream):
            _prepare(sock)
        half_s = self.rtt_s / 2
        # Far away, the client's first bytes would leave one RTT later: after SYN and SYN-ACK.
        hold_s = self.rtt_s if self.emulate_tcp_handshake else 0.0
        up, down = queue.Queue(), queue.Queue()
        threads = [
            threading.Thread(target=_read, args=(client, up, half_s, hold_s), daemon=True),
            threading.Thread(target=_write, args=(upstream, up, self._sleeper), daemon=True),
            threading.Thread(target=_read, args=(upstream, down, half_s), daemon=True),
            threading.Thread(target=_write, args=(client, down, self._sleeper), daemon=True),
        ]
        closer = threading.Thread(target=self._close_when_done, args=(client, upstream, threads), daemon=True)
        with self._lock:
            self.connections += 1
            self._sockets.update((client, upstream))
            self._threads = [t for t in self._threads if t.is_alive()] + [*threads, closer]
        for thread in (*threads, closer):
            thread.start()

    def _close_when_done(self, client: socket.socket, upstream: socket.socket, threads: list) -> None:
        """Both writers done (both ends said FIN, or one side failed): close both sockets."""
        threads[1].join()
        threads[3].join()
        for sock in (client, upstream):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)  # wakes a reader still in recv
            sock.close()
            with self._lock:
                self._sockets.discard(sock)

    def stop(self) -> None:
        self._stopping.set()
        if self._acceptor.is_alive():
            self._acceptor.join(JOIN_TIMEOUT_S)
        self._listener.close()
        with self._lock:
            live = list(self._sockets)
            threads = list(self._threads)
        for sock in live:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(JOIN_TIMEOUT_S)
