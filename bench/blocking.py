"""The reference for the engine's per-request overhead: a plain blocking-socket Python client that
times the same phases as the engine's client, at the same boundaries (``perf_counter_ns``; connect
from before the socket exists to the connected socket, TTLB from there to the last body byte), one
new connection per request with ``Connection: close``.

Used by ``bench/generator`` (beside the engine subprocess) and ``bench/client_paired`` (taking turns
with the engine's client, request by request, in a gevent-patched process: there it is given the
unpatched ``socket`` and ``SSLContext`` classes, so it still blocks in the kernel).

``BlockingKept`` is the reference for the keep-alive HTTP/1.1 arms (one kept connection), ``BlockingH2``
the one for the HTTP/2 arms: the same ``jh2`` library, connection settings and
timing boundaries as the engine's ``H2Client`` (``workers/engine/http/http2.py``), on a blocking socket.
"""

from __future__ import annotations

import re
import socket
import ssl

import jh2.config
import jh2.connection
import jh2.events
import jh2.settings

_LENGTH = re.compile(rb"(?i)content-length: *(\d+)")


def blocking_context(
    context_cls: type = ssl.SSLContext, alpn: tuple[str, ...] = ("http/1.1",)
) -> ssl.SSLContext:
    """A client context as the engine's for ``verify_tls: false`` (no checks, ALPN http/1.1, or h2
    alone for the HTTP/2 arms)."""
    context = context_cls(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context


class BundledReference:
    """The reference on the bundled TLS library (pyOpenSSL, ``workers/engine/tls/libraries.py``): a context
    whose ``wrap_socket`` does a blocking handshake, as ``ssl.SSLContext``'s does."""

    def __init__(self, alpn: tuple[str, ...] = ("http/1.1",)) -> None:
        from workers.engine.tls.libraries import bundled_context

        self.context = bundled_context(verify=False, alpn=alpn)

    def wrap_socket(self, raw: socket.socket, server_hostname: str):
        from workers.engine.tls.libraries import BlockingTLS

        return BlockingTLS(self.context, raw, server_hostname)


def request_head(port: int, path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode()


def blocking_request(
    port: int, context: ssl.SSLContext | None, head: bytes, perf_ns, socket_cls: type = socket.socket
) -> tuple[int, int]:
    """One request on a new connection to 127.0.0.1:port: (connect µs, TTLB µs)."""
    t0 = perf_ns()
    raw = socket_cls(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    raw.connect(("127.0.0.1", port))
    t1 = perf_ns()
    sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
    sock.sendall(head)
    _read_answer(sock)
    t2 = perf_ns()
    sock.close()
    return (t1 - t0 + 500) // 1000, (t2 - t0 + 500) // 1000


class BlockingKept:
    """The reference for the keep-alive HTTP/1.1 arms (``plain``, ``tls``): one kept blocking
    connection to 127.0.0.1:port (TLS when ``context`` is given), opened on the first request, and
    per request TTLB from before its head is written to the last body byte (by ``Content-Length``),
    as the engine's single loop times one (``workers/engine/http/single_loop.py``)."""

    def __init__(self, port: int, context, path: str, perf_ns, socket_cls: type = socket.socket) -> None:
        self.port, self.context, self.perf_ns, self.socket_cls = port, context, perf_ns, socket_cls
        # The engine's own head (workers/engine/http/http1.py).
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: tollgate/0.1\r\n"
        self.head = (head + "Accept: */*\r\n\r\n").encode()
        self.sock = None

    def request(self) -> tuple[None, int]:
        """One request on the kept connection: (None, TTLB µs); no connect after the first."""
        if self.sock is None:
            raw = self.socket_cls(socket.AF_INET, socket.SOCK_STREAM)
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.connect(("127.0.0.1", self.port))
            self.sock = self.context.wrap_socket(raw, server_hostname="127.0.0.1") if self.context else raw
        t0 = self.perf_ns()
        self.sock.sendall(self.head)
        _read_answer(self.sock)
        return None, (self.perf_ns() - t0 + 500) // 1000

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _read_answer(sock) -> None:
    """One answer read to its last byte by its ``Content-Length``; anything but a 200 is an error (the
    pairs are of the same page's answers: an error page is other work)."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the response head")
        buf += chunk
    if not buf.startswith(b"HTTP/1.") or buf[9:12] != b"200":
        status_line = buf.partition(b"\r\n")[0][:80]
        raise ConnectionError(f"answered {status_line!r}, not 200")
    end = buf.index(b"\r\n\r\n") + 4
    length = int(_LENGTH.search(buf[:end]).group(1))
    have = len(buf) - end
    while have < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed inside the body")
        have += len(chunk)


class BlockingH2:
    """A blocking HTTP/2 client on the ``jh2`` library: one connection to 127.0.0.1:port (TLS with ALPN
    h2 when ``context`` is given, else prior knowledge), opened as the engine's ``H2Client`` opens one
    (preface, a 2**30 connection window, SETTINGS_INITIAL_WINDOW_SIZE 2**24) and timed at its
    boundaries: connect from before the socket exists to the connected socket; TTLB from there (a new
    connection) or from the request's frames handed to the socket (a kept one) to the end of the
    stream, the library's building of the request's frames left out, as the engine leaves it out."""

    def __init__(self, port: int, context, path: str, perf_ns, socket_cls: type = socket.socket) -> None:
        self.port, self.context, self.perf_ns, self.socket_cls = port, context, perf_ns, socket_cls
        self.headers = [
            (b":method", b"GET"),
            (b":scheme", b"https" if context else b"http"),
            (b":authority", f"127.0.0.1:{port}".encode()),
            (b":path", path.encode()),
            (b"user-agent", b"tollgate/0.1"),
            (b"accept", b"*/*"),
        ]
        self.sock = None
        self.conn: jh2.connection.H2Connection | None = None

    def _open(self) -> int:
        raw = self.socket_cls(socket.AF_INET, socket.SOCK_STREAM)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.connect(("127.0.0.1", self.port))
        connected = self.perf_ns()
        sock = self.context.wrap_socket(raw, server_hostname="127.0.0.1") if self.context else raw
        if self.context and sock.selected_alpn_protocol() != "h2":
            sock.close()
            raise ConnectionError("the server did not select h2 over ALPN")
        config = jh2.config.H2Configuration(
            client_side=True,
            header_encoding=None,
            validate_outbound_headers=False,
            normalize_outbound_headers=False,
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
        )
        conn = jh2.connection.H2Connection(config)
        conn.initiate_connection()
        conn.increment_flow_control_window(2**30 - 65535)
        conn.update_settings({jh2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 2**24})
        sock.sendall(conn.data_to_send())
        self.sock, self.conn = sock, conn
        return connected

    def request(self, new_connection: bool) -> tuple[int | None, int]:
        """One GET: (connect µs or None on a kept connection, TTLB µs)."""
        connect_us = None
        t0 = self.perf_ns()
        if self.conn is None:
            connected = self._open()
            connect_us = (connected - t0 + 500) // 1000
        conn = self.conn
        built = self.perf_ns()
        stream_id = conn.get_next_available_stream_id()
        conn.send_headers(stream_id, self.headers, end_stream=True)
        out = conn.data_to_send()
        built_ns = self.perf_ns() - built
        if connect_us is None:
            t0 = self.perf_ns()  # a kept connection: from the first byte handed to the socket
            built_ns = 0
        self.sock.sendall(out)
        while True:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("connection closed before the end of the stream")
            now = self.perf_ns()
            ended = False
            for event in conn.receive_data(data):
                kind = type(event)
                if kind is jh2.events.DataReceived:
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                elif kind is jh2.events.ResponseReceived and event.stream_id == stream_id:
                    # The pairs are of the page's answers: another is other work (:status comes first).
                    if tuple(event.headers[0]) != (b":status", b"200"):
                        raise ConnectionError(f"answered {event.headers[0]!r}, not 200")
                elif kind is jh2.events.StreamEnded and event.stream_id == stream_id:
                    ended = True
                elif kind in (jh2.events.StreamReset, jh2.events.ConnectionTerminated):
                    raise ConnectionError(f"the server ended the stream: {event}")
            pending = conn.data_to_send()
            if pending:
                self.sock.sendall(pending)
            if ended:
                break
        if new_connection:
            self.close()
        return connect_us, (now - t0 - built_ns + 500) // 1000

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = self.conn = None
