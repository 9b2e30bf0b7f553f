"""One connection of the timed client under gevent, driven directly: the C socket, OpenSSL's socket
object and one read watcher, waits on the hub under the user's one reusable timer.

gevent's cooperative ``socket``/``SSLSocket`` classes do the same waits, but through layers that cost
a measurable share of a new connection's time on loopback: creating the wrapper (two I/O watchers and
a Python ``__init__``), a new ``Timeout`` (a libev timer made, started, stopped and closed) for every
wait, a doomed non-blocking call before each wait, and for TLS the ``SSLSocket`` wrapper's own
checks around every handshake step, read and write. This is what gevent's classes do, without the
layers (gevent itself wraps the C socket with ``SSLContext._wrap_socket``): a non-blocking call, and
on "would block" the same wait on the same kind of watcher, then the call again.

Only the client uses it, and only under gevent (``TimedClient`` keeps plain blocking sockets
elsewhere). The timing boundaries stay where the client takes them: this changes what the waits
cost, not what is timed.
"""

from __future__ import annotations

import _socket
import errno
import os
import socket
import ssl

from gevent import get_hub, getcurrent
from gevent.socket import wait_write as _gevent_wait_write

from workers.engine.tls.libraries import SSL, BundledTLS

# This module uses private parts of ``ssl`` (``SSLContext._wrap_socket``, ``_encode_hostname``), a
# ``_socket.socket`` subclass and gevent's hub loop (``hub.loop.io``, ``hub.wait``); variants.py uses
# ``SSLContext._msg_callback``. Checked on these versions: tests/workers/test_private_api.py fails on
# any other until this code has been checked again and the pins moved.
PRIVATE_API_CHECKED_ON = {"python": "3.11", "gevent": "26.9"}
_IN_PROGRESS = (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK)
READ, WRITE = 1, 2
_STREAM_NONBLOCK = socket.SOCK_STREAM | socket.SOCK_NONBLOCK


class _Socket(_socket.socket):
    """The C socket, weak-referenceable (OpenSSL's socket object holds it by a weak reference)."""

    __slots__ = ("__weakref__",)


class UserWaits:
    """One virtual user's waits: the hub and one reusable timer, armed afresh for each wait. A timeout
    is per wait, ``timeout_s`` long, raised as ``TimeoutError`` in the waiting greenlet.

    The timer repeats every ``timeout_s`` and each wait arms it with ``again`` (libev's
    ``ev_timer_again``: due ``timeout_s`` from now). A stopped one-shot timer started again (what
    ``gevent.Timeout.start`` after ``cancel`` does) is only given what was left of it, so the
    waits of a user's whole run would add up to one spurious timeout."""

    __slots__ = ("hub", "timeout_s", "_timer")

    def __init__(self, timeout_s: float) -> None:
        self.hub = get_hub()
        self.timeout_s = timeout_s
        self._timer = self.hub.loop.timer(timeout_s, timeout_s)

    def wait(self, watcher) -> None:
        timer = self._timer
        timer.again(_expire, getcurrent(), update=True)
        try:
            self.hub.wait(watcher)
        finally:
            timer.stop()


def _expire(greenlet) -> None:
    """The timer's callback (on the hub): the wait it guards ends with ``TimeoutError``."""
    greenlet.throw(TimeoutError("timed out"))


class CoopConnection:
    """A connected non-blocking C socket (optionally with TLS on it) whose calls wait cooperatively.

    The surface the client uses: ``send``, ``sendall``, ``recv``, ``pending``, ``wait_readable``,
    ``close``, and for TLS ``session`` and ``session_reused``."""

    __slots__ = ("raw", "tls", "_waits", "_reader", "_writer")

    def __init__(self, raw: _socket.socket, waits: UserWaits) -> None:
        self.raw = raw
        self.tls = None  # OpenSSL's socket object (``_ssl._SSLSocket``) once TLS is on
        self._waits = waits
        self._reader = waits.hub.loop.io(raw.fileno(), READ)
        self._writer = None  # made on the first write that would block (rare)

    @classmethod
    def open(cls, family: int, address: tuple[str, int], waits: UserWaits) -> CoopConnection:
        """A new TCP connection to a resolved address: only the connect, no name lookup.

        A non-blocking ``connect`` is asked again at once (on loopback the TCP handshake completes
        within the first call); only a connect still in progress waits for writability."""
        raw = _Socket(family, _STREAM_NONBLOCK)  # non-blocking from the start: no extra system call
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            err = raw.connect_ex(address)
            if err in _IN_PROGRESS:
                err = raw.connect_ex(address)
                if err in _IN_PROGRESS:
                    _gevent_wait_write(
                        raw.fileno(), timeout=waits.timeout_s, timeout_exc=TimeoutError("connect timed out")
                    )
                    err = raw.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err and err != errno.EISCONN:
                raise OSError(err, os.strerror(err))  # OSError picks the subclass: ConnectionRefusedError …
        except BaseException:
            raw.close()
            raise
        return cls(raw, waits)

    def start_tls(self, context: ssl.SSLContext | SSL.Context, server_hostname: str, session):
        """The TLS handshake over this connection, as ``SSLContext.wrap_socket`` does it (SNI and
        certificate checks by the context), waiting on the hub whenever OpenSSL wants I/O. A
        pyOpenSSL context (the bundled library, ``tls.libraries``) gets its ``BundledTLS``, which offers the
        same surface and raises the same exceptions as OpenSSL's socket object in ``ssl``."""
        if isinstance(context, SSL.Context):
            self.tls = BundledTLS(context, self.raw, server_hostname, session)
        else:
            hostname = context._encode_hostname(server_hostname)  # what SSLSocket passes OpenSSL
            self.tls = context._wrap_socket(self.raw, False, hostname, owner=None, session=session)
        self._tls_io(self.tls.do_handshake)

    def _tls_io(self, call, *args):
        while True:
            try:
                return call(*args)
            except ssl.SSLWantReadError:
                self._waits.wait(self._reader)
            except ssl.SSLWantWriteError:
                self._wait_writable()

    def _wait_writable(self) -> None:
        if self._writer is None:
            self._writer = self._waits.hub.loop.io(self.raw.fileno(), WRITE)
        self._waits.wait(self._writer)

    def wait_readable(self) -> None:
        """Wait for the answer before asking for it (the first read of a response): a doomed
        non-blocking call first would cost a system call and an exception for nothing."""
        self._waits.wait(self._reader)

    def send(self, data: bytes) -> int:
        if self.tls is not None:
            return self._tls_io(self.tls.write, data)
        while True:
            try:
                return self.raw.send(data)
            except BlockingIOError:
                self._wait_writable()

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[self.send(view) :]

    def recv(self, size: int) -> bytes:
        if self.tls is None:
            while True:
                try:
                    return self.raw.recv(size)
                except BlockingIOError:
                    self._waits.wait(self._reader)
        try:
            return self._tls_io(self.tls.read, size)
        except ssl.SSLEOFError:
            return b""  # a TCP close without close_notify reads as the end, as SSLSocket's default

    def pending(self) -> int:
        return self.tls.pending() if self.tls is not None else 0

    @property
    def session(self) -> ssl.SSLSession | None:
        return self.tls.session if self.tls is not None else None

    @property
    def session_reused(self) -> bool | None:
        return self.tls.session_reused if self.tls is not None else None

    def selected_alpn_protocol(self) -> str | None:
        return self.tls.selected_alpn_protocol() if self.tls is not None else None

    def close(self) -> None:
        """Stop and drop the watchers, then close the socket (no close_notify, as ``SSLSocket.close``)."""
        for watcher in (self._reader, self._writer):
            if watcher is not None:
                watcher.stop()
                watcher.close()
        self._reader = self._writer = None
        if type(self.tls) is BundledTLS:
            self.tls.close()  # its session stays resumable (OpenSSL's socket object does it itself)
        self.tls = None
        self.raw.close()
