"""Real local HTTP/HTTPS servers for the tests, on loopback, with server-side counters.

Each server counts TCP connections, TLS handshakes and resumed sessions as the *server* sees them,
so tests can prove what the client did on the wire instead of trusting the client's own word.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Handler = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], bytes]]


def sized_page(size: int) -> bytes:
    line = b"tollgate test page " * 8
    return (line * (size // len(line) + 1))[:size]


def pages_handler(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    sizes = {"/1k": 1024, "/2k": 2048, "/4k": 4096}
    if request.path in sizes:
        return 200, {"Content-Type": "text/html"}, sized_page(sizes[request.path])
    return 404, {"Content-Type": "text/plain"}, b"not found"


class Counters:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.handshakes = 0
        self.resumed = 0
        self.requests = 0

    def add(self, **kwargs: int) -> None:
        with self.lock:
            for name, value in kwargs.items():
                setattr(self, name, getattr(self, name) + value)

    def snapshot(self) -> dict[str, int]:
        with self.lock:
            return {
                "connections": self.connections,
                "handshakes": self.handshakes,
                "resumed": self.resumed,
                "requests": self.requests,
            }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, address, handler_cls, *, ssl_context: ssl.SSLContext | None, app: Handler) -> None:
        self.ssl_context = ssl_context
        self.app = app
        self.counters = Counters()
        super().__init__(address, handler_cls)

    def process_request_thread(self, request, client_address):
        # The TLS handshake runs in the connection's own thread, not in the accept loop.
        self.counters.add(connections=1)
        if self.ssl_context is not None:
            try:
                request = self.ssl_context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError):
                request.close()
                return
            self.counters.add(handshakes=1, resumed=int(request.session_reused))
        super().process_request_thread(request, client_address)

    def handle_error(self, request, client_address):
        # Swarms stop mid-connection by design; a reset peer is not a server fault.
        pass


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive unless the client says close
    # Without TCP_NODELAY the head and body writes meet the client's delayed ACK: +40 ms each.
    disable_nagle_algorithm = True

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.server.counters.add(requests=1)
        status, headers, body = self.server.app(self)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - silence per-request logging
        pass


class LocalServer:
    """A server on 127.0.0.1 and a free port, serving in a background thread."""

    def __init__(self, *, tls: tuple[Path, Path] | None = None, app: Handler = pages_handler) -> None:
        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
        self.httpd = _Server(("127.0.0.1", 0), _RequestHandler, ssl_context=context, app=app)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def counters(self) -> Counters:
        return self.httpd.counters

    def url(self, path: str = "/1k") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    def start(self) -> LocalServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def closed_port() -> int:
    """A loopback port with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
