"""The TCP connect of the timed client: only the connect, no name lookup, no extra hub switch."""

from __future__ import annotations

import errno
import os
import socket

_IN_PROGRESS = (errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK)


def connect(sock: socket.socket, address: tuple[str, int], timeout_s: float) -> None:
    """Connect ``sock`` to a resolved address; only the connect, no name lookup.

    gevent's ``create_connection`` asks the hub's resolver (a thread pool: two thread switches) on
    every connection, host literal or not, and its socket's ``connect`` starts a timer and waits on
    the hub for writability: on loopback that made the measured connect 2-4x a blocking client's.
    Here a non-blocking ``connect`` is asked again at once (on loopback the TCP handshake has
    completed within the first call), and only a connect still in progress waits for the socket to
    become writable, yielding to other greenlets.
    Without gevent (plain threads, tests) it is the socket's own blocking connect with its timeout.
    """
    inner = getattr(sock, "_sock", None)  # gevent's cooperative socket wraps a non-blocking one
    if inner is None:
        sock.connect(address)
        return
    err = inner.connect_ex(address)
    if err in _IN_PROGRESS:
        err = inner.connect_ex(address)
        if err in _IN_PROGRESS:
            from gevent.socket import wait_write

            wait_write(sock.fileno(), timeout=timeout_s, timeout_exc=TimeoutError("connect timed out"))
            err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err and err != errno.EISCONN:
        raise OSError(err, os.strerror(err))  # OSError picks the subclass: ConnectionRefusedError …
