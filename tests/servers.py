"""Real local HTTP/HTTPS servers for the tests, on loopback, with server-side counters.

Each server counts TCP connections, TLS handshakes and resumed sessions as the *server* sees them,
so tests can prove what the client did on the wire instead of trusting the client's own word.
``LocalServer`` can also end keep-alive connections as real servers do: after a number of requests
(nginx ``keepalive_requests``, Apache ``MaxKeepAliveRequests``) or when idle (``keepalive_timeout``).
"""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

Handler = Callable[[BaseHTTPRequestHandler], tuple[int, dict[str, str], "bytes | Paced"]]


def sized_page(size: int) -> bytes:
    line = b"tollgate test page " * 8
    return (line * (size // len(line) + 1))[:size]


def pages_handler(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    sizes = {"/1k": 1024, "/2k": 2048, "/4k": 4096}
    if request.path in sizes:
        return 200, {"Content-Type": "text/html"}, sized_page(sizes[request.path])
    return 404, {"Content-Type": "text/plain"}, b"not found"


class Paced:
    """A body sent in parts, each after its pause: the first byte leaves long before the last."""

    def __init__(self, parts: list[tuple[float, bytes]]) -> None:
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(part) for _, part in self.parts)


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

    def __init__(
        self,
        address,
        handler_cls,
        *,
        ssl_context: ssl.SSLContext | None,
        app: Handler,
        max_requests_per_connection: int | None = None,
        keepalive_timeout_s: float | None = None,
    ) -> None:
        self.ssl_context = ssl_context
        self.app = app
        self.max_requests_per_connection = max_requests_per_connection
        self.keepalive_timeout_s = keepalive_timeout_s
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
    served = 0  # requests answered on this connection (one handler per connection)

    def setup(self) -> None:
        # An idle keep-alive connection is closed after this long (None: kept until the client goes).
        self.timeout = self.server.keepalive_timeout_s
        super().setup()

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.server.counters.add(requests=1)
        self.served += 1
        status, headers, body = self.server.app(self)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        limit = self.server.max_requests_per_connection
        if limit and self.served >= limit:
            self.send_header("Connection", "close")  # and http.server closes it after this answer
        if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if isinstance(body, Paced):
            self.wfile.flush()
            for pause_s, part in body.parts:
                time.sleep(pause_s)
                self.wfile.write(part)
                self.wfile.flush()
            return
        self.wfile.write(body)

    def log_message(self, format, *args):  # noqa: A002 - silence per-request logging
        pass


class LocalServer:
    """A server on 127.0.0.1 (or another loopback address) and a free port, serving in a background
    thread."""

    def __init__(
        self,
        *,
        tls: tuple[Path, Path] | None = None,
        app: Handler = pages_handler,
        tickets: bool = True,
        host: str = "127.0.0.1",
        max_requests_per_connection: int | None = None,
        keepalive_timeout_s: float | None = None,
    ) -> None:
        """``max_requests_per_connection``: the N-th answer on a connection says ``Connection:
        close`` and ends it; ``keepalive_timeout_s``: a connection idle that long is closed."""
        context = None
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(tls[0]), str(tls[1]))
            if not tickets:
                # No TLS 1.3 tickets at all: a server that cannot resume sessions.
                context.num_tickets = 0
                context.options |= ssl.OP_NO_TICKET
        self.host = host
        self.httpd = _Server(
            (host, 0),
            _RequestHandler,
            ssl_context=context,
            app=app,
            max_requests_per_connection=max_requests_per_connection,
            keepalive_timeout_s=keepalive_timeout_s,
        )
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )

    @property
    def counters(self) -> Counters:
        return self.httpd.counters

    def url(self, path: str = "/1k") -> str:
        return f"{self.scheme}://{self.host}:{self.port}{path}"

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


def sized_pages(sizes: dict[str, int]) -> Handler:
    """Pages of the given sizes by path; 404 elsewhere."""

    def handler(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        if request.path in sizes:
            return 200, {"Content-Type": "text/html"}, sized_page(sizes[request.path])
        return 404, {"Content-Type": "text/plain"}, b"not found"

    return handler


class AuthPages:
    """Pages behind an Authorization check; counts the 401s it sends (proof of pre-emptive auth)."""

    def __init__(self, authorization: str) -> None:
        self.authorization = authorization
        self.refused = 0
        self.by_path: dict[str, int] = {}
        self.lock = threading.Lock()

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.by_path[request.path] = self.by_path.get(request.path, 0) + 1
        if request.headers.get("Authorization") != self.authorization:
            with self.lock:
                self.refused += 1
            return 401, {"WWW-Authenticate": 'Basic realm="test"', "Content-Type": "text/plain"}, b"no"
        return pages_handler(request)


class ServerSoftware:
    """Pages answered with a ``Server`` header of the test's choosing (``name``, sent as is, with the
    trailing blank http.server adds after it): set another ``name`` between two runs to upgrade the
    server."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        request.server_version, request.sys_version = self.name, ""  # version_string(): "name "
        return pages_handler(request)


class HeaderLog:
    """Pages that remember the request headers of every request, as the server received them."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.seen.append({name.lower(): value for name, value in request.headers.items()})
        return pages_handler(request)

    def with_header(self, name: str) -> int:
        with self.lock:
            return sum(1 for headers in self.seen if name.lower() in headers)


class HostsSeen:
    """Pages that remember the Host header of every request (and, on TLS, the SNI name offered)."""

    def __init__(self) -> None:
        self.hosts: list[str] = []
        self.server_names: list[str | None] = []
        self.lock = threading.Lock()

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.hosts.append(request.headers.get("Host", ""))
        return pages_handler(request)

    def watch_sni(self, server: LocalServer) -> None:
        def remember(sock, name, context) -> None:
            with self.lock:
                self.server_names.append(name)

        server.httpd.ssl_context.sni_callback = remember


def varying_pages(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    """A 'dynamic' page: every answer has another length (900–1100 bytes)."""
    import random

    return 200, {"Content-Type": "text/html"}, sized_page(random.randint(900, 1100))  # noqa: S311


def redirecting_pages(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
    """/old → 301 /1k (same origin); /away → 302 to another scheme and port; pages otherwise."""
    if request.path == "/old":
        return 301, {"Location": "/1k"}, b""
    if request.path == "/away":
        return 302, {"Location": "https://127.0.0.1:9/1k"}, b""
    return pages_handler(request)


class DriftingPages:
    """Answers get slower the longer the server runs: +6 ms per second since its first request."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        import time

        now = time.monotonic()
        if self.t0 is None:
            self.t0 = now
        time.sleep(0.002 + 0.006 * (now - self.t0))
        return pages_handler(request)


class _RawServer:
    """A hand-made plain HTTP server on loopback, for behaviours http.server cannot show: it accepts
    in one thread and answers each connection with a 1 KB page (``answer``) unless a subclass says
    otherwise (``handle``, or its own ``_serve``)."""

    backlog = 128

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(self.backlog)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        body = sized_page(1024)
        head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        self.response = head.encode() + body

    def url(self, path: str = "/1k") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self):
        self.thread.start()
        return self

    def _serve(self) -> None:
        """Accept until stopped, each connection ``handle``d and then closed."""
        while not self.stopping.is_set():
            conn = self.accept()
            if conn is not None:
                with conn:
                    self.handle(conn)

    def handle(self, conn: socket.socket) -> None:
        self.answer(conn)

    def accept(self) -> socket.socket | None:
        try:
            conn, _ = self.sock.accept()
        except (TimeoutError, OSError):
            return None
        return conn

    def answer(self, conn: socket.socket) -> None:
        conn.settimeout(2)
        try:
            conn.recv(65536)
            conn.sendall(self.response)
        except OSError:
            pass

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=5)
        self.sock.close()


class StallingServer(_RawServer):
    """A plain HTTP server with a listen backlog of 1 that stops accepting for ``stall_s`` every
    ``serve_s`` (a GC pause, a blocked worker). During a stall its accept queue overflows, the
    kernel drops SYNs and clients retransmit them 1 s later, when it serves again: connects of
    about 1 s, the SAP study's unexplained '> 1000 ms' tail."""

    backlog = 1

    def __init__(self, serve_s: float = 1.5, stall_s: float = 0.3) -> None:
        super().__init__()
        self.serve_s = serve_s
        self.stall_s = stall_s

    def _serve(self) -> None:
        phase_end = time.monotonic() + self.serve_s
        while not self.stopping.is_set():
            if time.monotonic() >= phase_end:
                self.stopping.wait(self.stall_s)
                phase_end = time.monotonic() + self.serve_s
            conn = self.accept()
            if conn is not None:
                with conn:
                    self.answer(conn)


def gzipped_pages(sizes: dict[str, int]) -> Handler:
    """Pages of the given sizes, always gzipped (``Content-Encoding: gzip``, asked or not): a server
    that compresses on one port only serves another representation there."""
    import gzip

    def handler(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        if request.path in sizes:
            body = gzip.compress(sized_page(sizes[request.path]), mtime=0)
            return 200, {"Content-Type": "text/html", "Content-Encoding": "gzip"}, body
        return 404, {"Content-Type": "text/plain"}, b"not found"

    return handler


def answering(status: int) -> Handler:
    """Every request gets ``status`` (e.g. 431 Request Header Fields Too Large) and a short body."""

    def handler(request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        return status, {"Content-Type": "text/plain"}, b"refused"

    return handler


class PassesPreflight:
    """Answers its first ``good`` requests with a 1 KB page, whatever the path (the engine's
    preflight: one request per arm and path on this server), then hands every later one to ``then``:
    a target that goes wrong once the load has started, so the measured answers are ``then``'s."""

    def __init__(self, then: Handler, good: int = 1) -> None:
        self.then = then
        self.good = good
        self.seen = 0
        self.lock = threading.Lock()

    def __call__(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.seen += 1
            first = self.seen <= self.good
        if first:
            return 200, {"Content-Type": "text/html"}, sized_page(1024)
        return self.then(request)


class FailingAfter(PassesPreflight):
    """Answers its first ``ok`` requests with a 1 KB page, every later one with ``status``: a target
    that passes any preflight and then breaks (``failed``: the error answers, counted by the server)."""

    def __init__(self, ok: int = 5, status: int = 500) -> None:
        super().__init__(self._broken, good=ok)
        self.status = status
        self.failed = 0

    def _broken(self, request: BaseHTTPRequestHandler) -> tuple[int, dict[str, str], bytes]:
        with self.lock:
            self.failed += 1
        return self.status, {"Content-Type": "text/plain"}, b"broken"


class ResettingServer(_RawServer):
    """A plain HTTP server that answers one connection in ``every`` and resets the others at once
    (SO_LINGER 0): an arm with a new connection per request sees most attempts fail. The first
    connection is answered, so the engine's preflight passes."""

    def __init__(self, every: int = 4) -> None:
        super().__init__()
        self.every = every
        self.accepted = 0
        self.reset = 0

    def _serve(self) -> None:
        while not self.stopping.is_set():
            conn = self.accept()
            if conn is None:
                continue
            self.accepted += 1
            with conn:
                if (self.accepted - 1) % self.every:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.reset += 1
                    continue
                self.answer(conn)


class RateCapped:
    """At most ``rate`` answers a second: a token bucket of one token, each answer waits for the next
    free slot (and at least ``service_s``, the server's work), so the rest queue (saturation tests)."""

    def __init__(self, rate: float, service_s: float = 0.0) -> None:
        self.service_s = service_s
        self.interval_s = 1.0 / rate
        self.next_slot = 0.0
        self.lock = threading.Lock()

    def __call__(self, request):
        with self.lock:
            now = time.monotonic()
            slot = max(now, self.next_slot)
            self.next_slot = slot + self.interval_s
        time.sleep(max(self.service_s, slot - now))
        return pages_handler(request)
