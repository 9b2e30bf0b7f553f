"""The reference for the engine's per-request overhead: a plain blocking-socket Python client that
times the same phases as the engine's client, at the same boundaries (``perf_counter_ns``; connect
from before the socket exists to the connected socket, TTLB from there to the last body byte), one
new connection per request with ``Connection: close``.

Used by ``bench/generator`` (beside the engine subprocess) and ``bench/client_paired`` (taking turns
with the engine's client, request by request, in a gevent-patched process: there it is given the
unpatched ``socket`` and ``SSLContext`` classes, so it still blocks in the kernel).
"""

from __future__ import annotations

import re
import socket
import ssl

_LENGTH = re.compile(rb"(?i)content-length: *(\d+)")


def blocking_context(context_cls: type = ssl.SSLContext) -> ssl.SSLContext:
    """A client context as the engine's for ``verify_tls: false`` (no checks, ALPN http/1.1)."""
    context = context_cls(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["http/1.1"])
    return context


class BundledReference:
    """The reference on the bundled TLS library (pyOpenSSL, ``workers/engine/tlslib.py``): a context
    whose ``wrap_socket`` does a blocking handshake, as ``ssl.SSLContext``'s does."""

    def __init__(self) -> None:
        from workers.engine.tlslib import bundled_context

        self.context = bundled_context(verify=False)

    def wrap_socket(self, raw: socket.socket, server_hostname: str):
        from workers.engine.tlslib import BlockingTLS

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
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed before the response head")
        buf += chunk
    end = buf.index(b"\r\n\r\n") + 4
    length = int(_LENGTH.search(buf[:end]).group(1))
    have = len(buf) - end
    while have < length:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("connection closed inside the body")
        have += len(chunk)
    t2 = perf_ns()
    sock.close()
    return (t1 - t0 + 500) // 1000, (t2 - t0 + 500) // 1000
