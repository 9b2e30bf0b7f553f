"""A lean, timed HTTP/1.1 client.

Stock Locust clients round to whole milliseconds and expose neither time to first byte nor the
connect / handshake split. This one times every phase with ``perf_counter_ns`` and keeps the
connection policy explicit per arm:

* keep-alive arms hold one connection per virtual user (one handshake per user); when the server
  closes it (``Connection: close`` after its keep-alive limit, or an idle timeout) the next request
  opens another and says so (``Sample.reopened``), so a report can tell what a keep-alive arm paid;
* ``*_new`` arms open a new TCP connection per request and send ``Connection: close``;
* ``tls_new`` never offers a session (a full handshake every time); ``tls_resumed`` offers the
  session captured from its previous connection.

Inside the engine (gevent has patched ``socket``) connections are driven directly on the hub
(``cooperative.py``): this blocks only the calling greenlet; elsewhere sockets block the calling thread.
It imports nothing from Locust, so it can be unit-tested on plain threads as well.

All timings start at the beginning of the request operation: when a connection has to be opened,
TCP connect and TLS handshake are part of TTFB and TTLB, because a user waits for them too.

A response head is parsed once per distinct head (``read_head``): a static page's head only
changes with its ``Date``, once a second. ``H2Client`` (``http2``) opens its connections through this
client's timed connect and handshake (``_open``).
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import NamedTuple

from workers.engine.http.cooperative import CoopConnection, UserWaits
from workers.engine.http.endpoint import ConnectionPolicy, Endpoint
from workers.engine.http.sample import ConnectionClosed, ProtocolError, Sample, _us, classify_error
from workers.engine.tls import libraries

USER_AGENT = "tollgate/0.1"
RECV_SIZE = 65536
MAX_HEAD_BYTES = 65536


class TimedClient:
    """One virtual user's connection(s) to one endpoint."""

    def __init__(
        self,
        endpoint: Endpoint,
        policy: ConnectionPolicy,
        ssl_context: ssl.SSLContext | libraries.SSL.Context | None,
        *,
        timeout_s: float = 10.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if endpoint.tls and ssl_context is None:
            raise ValueError("an https endpoint needs an SSL context")
        self.endpoint = endpoint
        self.policy = policy
        self.ssl_context = ssl_context
        self.timeout_s = timeout_s
        self.extra_headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._heads: dict[tuple[str, str], bytes] = {}  # (method, path) -> the request head
        self._family = socket.AF_INET6 if ":" in endpoint.address else socket.AF_INET
        # Under gevent (the engine patched ``socket``) connections are driven directly (cooperative.py), and
        # this user's waits share one reusable timer; elsewhere (threads, tests) sockets block.
        self._coop = hasattr(socket.socket, "_wait")
        self._tls = endpoint.tls
        self._waits: UserWaits | None = None
        self.sock: socket.socket | ssl.SSLSocket | CoopConnection | None = None
        self.session: ssl.SSLSession | None = None
        self.connections_opened = 0
        # The server ended this user's keep-alive connection: the next one opened is a reopening.
        self._server_closed = False
        # For SNI and certificate checks (no SNI for an IP literal, but its IP SANs are checked).
        self._server_hostname = endpoint.host

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = None

    def _open(self, sample: Sample) -> None:
        t0 = time.perf_counter_ns()
        conn = self._connect()
        t1 = time.perf_counter_ns()
        sample.connect_us = _us(t0, t1)
        self.connections_opened += 1
        if self._tls:
            session = self.session if self.policy.resume_sessions else None
            try:
                conn = self._start_tls(conn, session)
            except BaseException:
                conn.close()
                raise
            sample.tls_handshake_us = _us(t1, time.perf_counter_ns())
            sample.session_reused = conn.session_reused
        self.sock = conn

    def _connect(self) -> socket.socket | CoopConnection:
        """A TCP connection to the resolved address (no name lookup): driven directly under gevent,
        a blocking socket with the client's timeout elsewhere."""
        address = (self.endpoint.address, self.endpoint.port)
        if self._coop:
            if self._waits is None:
                self._waits = UserWaits(self.timeout_s)
            return CoopConnection.open(self._family, address, self._waits)
        raw = socket.socket(self._family, socket.SOCK_STREAM)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.settimeout(self.timeout_s)
            raw.connect(address)
        except BaseException:
            raw.close()
            raise
        return raw

    def _start_tls(self, conn, session: ssl.SSLSession | None) -> ssl.SSLSocket | CoopConnection:
        """The TLS handshake on a new connection (SNI and checks by the context), offering ``session``."""
        if self._coop:
            conn.start_tls(self.ssl_context, self._server_hostname, session)
            return conn
        if isinstance(self.ssl_context, libraries.SSL.Context):
            return libraries.BlockingTLS(self.ssl_context, conn, self._server_hostname, session)
        return self.ssl_context.wrap_socket(conn, server_hostname=self._server_hostname, session=session)

    def request(self, url: str, path: str, method: str = "GET") -> Sample:
        """Send one request and read the whole response. Never raises for network errors."""
        sample = Sample(url, 0)  # positional: a third cheaper than by keyword, once per request
        sample.start_ns = time.perf_counter_ns()  # after the record exists: its making is not the request's
        return self._complete(sample, path, method, None)

    def finish(self, sample: Sample, path: str, begun) -> Sample:
        """The rest of a GET that the single loop (``single_loop``) sent on this client's kept
        connection, as ``request`` does it from there on: ``begun`` is what the loop had read, (bytes,
        first-byte ns), the error it met (raised here, so it is retried or recorded as ``request``
        would), or the part of the head it could not send (bytes). Never raises for network errors."""
        return self._complete(sample, path, "GET", begun)

    def _complete(self, sample: Sample, path: str, method: str, begun) -> Sample:
        try:
            self._exchange(sample, path, method, begun)
        except Exception as exc:  # noqa: BLE001 - every failure becomes data, never a crash
            sample.error = classify_error(exc)
            sample.error_detail = f"{type(exc).__name__}: {exc}"[:300]
            self.close()
        sample.end_ns = time.perf_counter_ns()
        return sample

    def head_for(self, path: str, method: str = "GET") -> bytes:
        """The request head for ``method path`` on this client's endpoint and policy, as it is written
        (the single loop writes it for a parked connection, ``http.single_loop``)."""
        return self._heads.get((method, path)) or self._head(method, path)

    def _head(self, method: str, path: str) -> bytes:
        """The request head, built once per (method, path): the same bytes every time."""
        close_header = "Connection: close\r\n" if self.policy.new_connection_per_request else ""
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.endpoint.host_header}\r\nUser-Agent: {USER_AGENT}\r\n"
            f"Accept: */*\r\n{close_header}{self.extra_headers}\r\n"
        ).encode("latin-1")
        if len(self._heads) < 256:
            self._heads[(method, path)] = head
        return head

    def _exchange(self, sample: Sample, path: str, method: str, begun=None) -> None:
        new_conn = self.policy.new_connection_per_request
        head = self.head_for(path, method)
        reused = self.sock is not None
        if not reused:
            sample.reopened, self._server_closed = self._server_closed, False
            self._open(sample)
        try:
            if begun is None:
                self._send(head)
                keep_alive = self._read_response(sample, method)
            elif type(begun) is bytes:  # the single loop sent only part of the head
                self.sock.sendall(begun)
                keep_alive = self._read_response(sample, method)
            else:
                keep_alive = self._read_response(sample, method, begun)
        except (ConnectionClosed, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            # The server closed an idle keep-alive connection: retry once on a fresh one, as
            # browsers do. The reconnect is part of this request's time.
            self.close()
            sample.reopened = True
            self._open(sample)
            self._send(head)
            keep_alive = self._read_response(sample, method)
        if new_conn or not keep_alive:
            if self.policy.resume_sessions and self.endpoint.tls:
                # TLS 1.3 tickets arrive after the handshake: the session is complete only now.
                self.session = self.sock.session
            self.close()
            self._server_closed = not new_conn

    def _send(self, head: bytes) -> None:
        # One send is the whole head almost always; sendall only for what is left.
        sent = self.sock.send(head)
        if sent < len(head):
            self.sock.sendall(head[sent:])

    def _read_response(self, sample: Sample, method: str, begun: tuple | BaseException | None = None) -> bool:
        """Read one response; fill status, sizes and times. Returns whether to keep the connection.
        ``begun``: the single loop's start on it, (bytes read, first-byte ns), or the error it met."""
        sock = self.sock
        if begun is None:
            if self._coop and not (self._tls and sock.pending()):
                sock.wait_readable()  # wait before asking: no doomed call (cooperative.py)
            buf = sock.recv(RECV_SIZE)
            if not buf:
                raise ConnectionClosed("connection closed before the response")
            t_first = time.perf_counter_ns()
        elif isinstance(begun, BaseException):
            raise begun
        else:
            buf, t_first = begun
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            buf = self._read_head(bytearray(buf))
            end = buf.find(b"\r\n\r\n")
        head = read_head(buf[:end] if type(buf) is bytes else bytes(buf[:end]))
        status, keep_alive = head.status, head.keep_alive
        have = len(buf) - end - 4  # body bytes already read
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            size = 0
        elif head.chunked:
            size = self._read_chunked(bytearray(buf[end + 4 :]))
        elif head.length is not None:
            if head.bad_length:
                raise ProtocolError("bad Content-Length")
            size = head.length
            while have < size:
                chunk = sock.recv(min(RECV_SIZE, size - have))
                if not chunk:
                    raise ProtocolError("connection closed inside the body")
                have += len(chunk)
        else:
            size = have
            while chunk := sock.recv(RECV_SIZE):
                size += len(chunk)
            keep_alive = False
        t_last = time.perf_counter_ns()
        sample.status, sample.body_bytes = status, size
        sample.location, sample.server, sample.content_type, sample.content_encoding = head.noted
        start = sample.start_ns - 500  # ``_us`` of both, written out: rounded to the nearest µs, at least 1
        sample.ttfb_us = max(1, (t_first - start) // 1000)
        sample.ttlb_us = max(1, (t_last - start) // 1000)
        return keep_alive

    def _read_head(self, buf: bytearray) -> bytearray:
        """More of a response whose head did not come in one piece, until the head is complete."""
        while buf.find(b"\r\n\r\n") < 0:
            if len(buf) > MAX_HEAD_BYTES:
                raise ProtocolError("response head larger than 64 KiB")
            chunk = self.sock.recv(RECV_SIZE)
            if not chunk:
                raise ProtocolError("connection closed inside the response head")
            buf += chunk
        return buf

    def _read_chunked(self, buf: bytearray) -> int:
        total = 0
        pos = 0
        while True:
            line_end = self._fill_until(buf, b"\r\n", pos)
            size_text = bytes(buf[pos:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise ProtocolError(f"bad chunk size {size_text[:20]!r}") from None
            pos = line_end + 2
            if size == 0:
                # Trailers end with an empty line.
                while True:
                    line_end = self._fill_until(buf, b"\r\n", pos)
                    if line_end == pos:
                        return total
                    pos = line_end + 2
            while len(buf) < pos + size + 2:
                chunk = self.sock.recv(RECV_SIZE)
                if not chunk:
                    raise ProtocolError("connection closed inside a chunk")
                buf += chunk
            total += size
            pos += size + 2
            if pos > RECV_SIZE:
                del buf[:pos]
                pos = 0

    def _fill_until(self, buf: bytearray, marker: bytes, pos: int) -> int:
        while (found := buf.find(marker, pos)) < 0:
            chunk = self.sock.recv(RECV_SIZE)
            if not chunk:
                raise ProtocolError("connection closed inside chunked framing")
            buf += chunk
        return found


def _note_headers(sample: Sample, headers: dict[str, str]) -> None:
    """The response headers a report needs: where a redirect points, what the body was, who served it."""
    sample.location, sample.server = headers.get("location"), headers.get("server")
    sample.content_type = headers.get("content-type", "")
    sample.content_encoding = headers.get("content-encoding", "")


class Head(NamedTuple):
    """What a response head says, read once per distinct head (``read_head``)."""

    status: int
    keep_alive: bool
    headers: dict[str, str]  # lower-case names
    chunked: bool  # Transfer-Encoding names chunked
    length: int | None  # Content-Length (None when absent)
    bad_length: bool  # a Content-Length that is not a number (an error only where the body needs it)
    # What ``_note_headers`` keeps: Location, Server, Content-Type, Content-Encoding.
    noted: tuple[str | None, str | None, str, str]
    # The plainest answer to a GET: a final status with a body (not 1xx, 204 or 304) framed by a valid
    # Content-Length, the connection kept. The single loop (``single_loop``) reads only these itself.
    plain: bool


_HEADS: dict[bytes, Head] = {}  # a head's bytes -> what it says (read only)


def read_head(raw: bytes) -> Head:
    """A response head (the bytes before its blank line). A static page's head is the same for a
    whole second (only ``Date`` moves): read once, then looked up by its bytes, with its framing
    and the fields a sample keeps."""
    found = _HEADS.get(raw)
    if found is None:
        status, keep_alive, headers = _parse_new_head(raw.decode("latin-1"))
        length, bad_length = None, False
        if "content-length" in headers:
            try:
                length = int(headers["content-length"])
            except ValueError:
                length, bad_length = 0, True
        noted = (
            headers.get("location"),
            headers.get("server"),
            headers.get("content-type", ""),
            headers.get("content-encoding", ""),
        )
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        plain = (
            length is not None and not bad_length and not chunked and keep_alive and status >= 200
        ) and status not in (204, 304)
        if len(_HEADS) >= 64:
            _HEADS.clear()
        found = _HEADS[raw] = Head(status, keep_alive, headers, chunked, length, bad_length, noted, plain)
    return found


def parse_head(text: str) -> tuple[int, bool, dict[str, str]]:
    """(status, keep-alive, headers with lower-case names) of a response head's text."""
    return read_head(text.encode("latin-1"))[:3]


def _parse_new_head(text: str) -> tuple[int, bool, dict[str, str]]:
    lines = text.split("\r\n")
    version, _, rest = lines[0].partition(" ")
    try:
        status = int(rest[:3])
    except ValueError:
        raise ProtocolError(f"bad status line {lines[0][:80]!r}") from None
    if not version.startswith("HTTP/1."):
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    keep_alive = version == "HTTP/1.1" and headers.get("connection", "").lower() != "close"
    return status, keep_alive, headers
