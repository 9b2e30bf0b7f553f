"""A real HTTPS server on the bundled OpenSSL (pyOpenSSL on the ``cryptography`` wheel's build), for
tests that need what Python's ``ssl`` (the system OpenSSL 3.0) cannot serve: the post-quantum hybrid
group X25519MLKEM768, several certificates on one context (RSA, ECDSA P-256 and Ed25519: OpenSSL
picks one per handshake by the client's signature algorithms), and a client-certificate request
verified against a CA of its own.

The server counts, per handshake and from its own side, what was negotiated: the group
(``SSL_get0_group_name``, as OpenSSL prints it), the type of the certificate it sent, the protocol,
whether the session was resumed and which client certificate (if any) it received — so a test checks
what the server saw, never what the client asked for. ``PyOpenSSLServer(...).start()``; ``url()``;
``counters.snapshot()``; ``stop()`` (also a context manager).

HTTP/1.1 with keep-alive, a minimal parser (request line and headers, no request bodies): GET and
HEAD of ``/1k``, ``/2k``, ``/4k`` (``tests.servers.sized_page``), 404 otherwise.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import ipaddress
import os
import socket
import struct
import threading
from collections import Counter
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.x509.oid import NameOID
from OpenSSL import SSL
from OpenSSL._util import ffi as _ffi
from OpenSSL._util import lib as _lib

from tests.servers import sized_page

KEY_TYPES = ("rsa", "ecdsa", "ed25519")
# The certificate's key type as the server counts it (and as workers.engine.tls.facts names it).
KEY_NAMES = {rsa.RSAPublicKey: "RSA", ec.EllipticCurvePublicKey: "EC", ed25519.Ed25519PublicKey: "Ed25519"}
DEFAULT_GROUPS = "X25519MLKEM768:x25519:secp256r1:secp384r1"
PAGES = {"/1k": 1024, "/2k": 2048, "/4k": 4096}


def _key(key_type: str, rsa_bits: int = 2048):
    if key_type == "rsa":
        return rsa.generate_private_key(public_exponent=65537, key_size=rsa_bits)
    if key_type == "ecdsa":
        return ec.generate_private_key(ec.SECP256R1())
    if key_type == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    raise ValueError(f"key type must be one of {', '.join(KEY_TYPES)}, not {key_type!r}")


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _write(directory: Path, name: str, cert: x509.Certificate, key) -> tuple[Path, Path]:
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return cert_path, key_path


def _certificate(subject: str, key, issuer_name: str, issuer_key, *, ca: bool, sans=()) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(_name(issuer_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if sans:
        names = []
        for san in sans:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(san)))
            except ValueError:
                names.append(x509.DNSName(san))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    digest = None if isinstance(issuer_key, ed25519.Ed25519PrivateKey) else hashes.SHA256()
    return builder.sign(issuer_key, digest)


class ClientCA:
    """A CA of the server's own for client certificates: ``issue(key_type)`` writes a client
    certificate and key it signed (``(cert_path, key_path)``)."""

    def __init__(self, directory: Path, key_type: str = "ecdsa") -> None:
        self.directory = directory
        self.key = _key(key_type)
        self.cert = _certificate(
            "Tollgate test client CA", self.key, "Tollgate test client CA", self.key, ca=True
        )
        self.cert_path, _ = _write(directory, "client-ca", self.cert, self.key)
        self.issued = 0

    def issue(self, key_type: str = "ecdsa", common_name: str | None = None) -> tuple[Path, Path]:
        self.issued += 1
        key = _key(key_type)
        name = common_name or f"client-{key_type}-{self.issued}"
        cert = _certificate(name, key, "Tollgate test client CA", self.key, ca=False)
        return _write(self.directory, f"client-{self.issued}", cert, key)


class Counters:
    """What the server saw, per handshake: ``groups`` (OpenSSL's names), ``certs`` (the key type of
    the certificate it sent: RSA, EC, Ed25519), ``protocols``, ``client_certs`` (the subject CN of
    the client certificate received, or ``none``); totals of connections, handshakes, resumed
    sessions, failed handshakes (with their errors) and requests."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = self.handshakes = self.resumed = self.requests = self.failed = 0
        self.groups: Counter[str] = Counter()
        self.certs: Counter[str] = Counter()
        self.protocols: Counter[str] = Counter()
        self.client_certs: Counter[str] = Counter()
        self.pairs: Counter[tuple[str, str, str]] = Counter()  # (protocol, group, cert) per handshake
        self.errors: list[str] = []

    def handshake(self, protocol: str, group: str, cert: str, resumed: bool, client: str) -> None:
        with self.lock:
            self.handshakes += 1
            self.resumed += int(resumed)
            self.groups[group] += 1
            self.certs[cert] += 1
            self.protocols[protocol] += 1
            self.client_certs[client] += 1
            self.pairs[(protocol, group, cert)] += 1

    def add(self, **kwargs: int) -> None:
        with self.lock:
            for name, value in kwargs.items():
                setattr(self, name, getattr(self, name) + value)

    def failure(self, error: str) -> None:
        with self.lock:
            self.failed += 1
            if len(self.errors) < 100:
                self.errors.append(error)

    def snapshot(self) -> dict:
        with self.lock:
            return {
                "connections": self.connections,
                "handshakes": self.handshakes,
                "resumed": self.resumed,
                "requests": self.requests,
                "failed": self.failed,
                "errors": list(self.errors),
                "groups": dict(self.groups),
                "certs": dict(self.certs),
                "protocols": dict(self.protocols),
                "client_certs": dict(self.client_certs),
                "pairs": dict(self.pairs),
            }


class PyOpenSSLServer:
    """HTTPS on 127.0.0.1 and a free port, on the bundled OpenSSL, one thread per connection.

    ``key_types``: the certificates held at once on one context (any of ``KEY_TYPES``; each
    self-signed for localhost, 127.0.0.1 and ::1; ``cert_paths[key_type]``); ``rsa_bits``: the RSA
    key's size; ``groups``: the key-exchange groups offered (OpenSSL's list syntax; the hybrid by
    default); ``min_version``/``max_version``: pyOpenSSL's ``TLS1_2_VERSION``…; ``client_ca``: ask
    for a client certificate verified against a CA of its own (``self.client_ca.issue()`` makes
    one), ``require_client_cert`` fails a handshake without one; ``tickets``: TLS session tickets
    (a session-ID cache is kept either way)."""

    def __init__(
        self,
        directory: Path,
        *,
        key_types: tuple[str, ...] = ("rsa", "ecdsa"),
        rsa_bits: int = 2048,
        groups: str = DEFAULT_GROUPS,
        min_version: int = SSL.TLS1_2_VERSION,
        max_version: int = SSL.TLS1_3_VERSION,
        client_ca: bool = False,
        require_client_cert: bool = False,
        tickets: bool = True,
        host: str = "127.0.0.1",
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.counters = Counters()
        self.cert_paths: dict[str, tuple[Path, Path]] = {}
        context = SSL.Context(SSL.TLS_SERVER_METHOD)
        context.set_min_proto_version(min_version)
        context.set_max_proto_version(max_version)
        for key_type in key_types:
            key = _key(key_type, rsa_bits)
            cert = _certificate(
                "localhost", key, "localhost", key, ca=False, sans=("localhost", "127.0.0.1", "::1")
            )
            self.cert_paths[key_type] = _write(directory, f"server-{key_type}", cert, key)
            # One context, several certificates: OpenSSL keeps one per key type and picks per handshake.
            context.use_certificate_file(str(self.cert_paths[key_type][0]))
            context.use_privatekey_file(str(self.cert_paths[key_type][1]))
        if _lib.SSL_CTX_set1_curves_list(context._context, groups.encode()) != 1:
            raise ValueError(f"the bundled OpenSSL does not take the groups {groups!r}")
        context.set_session_id(b"tollgate-pyossl")  # session-ID resumption (TLS 1.2)
        if not tickets:
            context.set_options(SSL.OP_NO_TICKET)  # TLS 1.3: stateful tickets instead
        self.client_ca: ClientCA | None = None
        if client_ca:
            self.client_ca = ClientCA(directory)
            context.load_verify_locations(str(self.client_ca.cert_path))
            context.load_client_ca(str(self.client_ca.cert_path).encode())
            mode = SSL.VERIFY_PEER | (SSL.VERIFY_FAIL_IF_NO_PEER_CERT if require_client_cert else 0)
            context.set_verify(mode, lambda conn, cert, errno, depth, ok: bool(ok))
        self.context = context
        self.listener = socket.create_server((host, 0), backlog=256)
        self.port = self.listener.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def url(self, path: str = "/1k") -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}{path}"

    def start(self) -> PyOpenSSLServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(OSError):  # wake the accept loop, then close the listener
            socket.create_connection((self.host, self.port), timeout=1).close()
        self._thread.join(timeout=5)
        self.listener.close()

    def __enter__(self) -> PyOpenSSLServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            if self._stop.is_set():
                sock.close()
                return
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        self.counters.add(connections=1)
        # Blocking (pyOpenSSL raises WantReadError on a socket with a timeout), but never stuck forever.
        sock.setblocking(True)
        idle = struct.pack("ll", 10, 0)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, idle)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, idle)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = SSL.Connection(self.context, sock)
        conn.set_accept_state()
        try:
            try:
                conn.do_handshake()
            except (SSL.Error, OSError) as exc:
                self.counters.failure(f"{type(exc).__name__}: {exc}")
                return
            self._count(conn)
            self._http(conn)
        finally:
            with contextlib.suppress(SSL.Error, OSError):
                conn.shutdown()
            sock.close()

    def _count(self, conn: SSL.Connection) -> None:
        name = _lib.SSL_get0_group_name(conn._ssl)
        group = _ffi.string(name).decode() if name != _ffi.NULL else "none"
        # The certificate this handshake used: OpenSSL's current one after it chose by sigalgs.
        public = conn.get_certificate().to_cryptography().public_key()
        cert = next((label for kind, label in KEY_NAMES.items() if isinstance(public, kind)), "other")
        peer = conn.get_peer_certificate()
        client = "none"
        if peer is not None:
            attrs = peer.to_cryptography().subject.get_attributes_for_oid(NameOID.COMMON_NAME)
            client = str(attrs[0].value) if attrs else "unnamed"
        resumed = bool(_lib.SSL_session_reused(conn._ssl))
        self.counters.handshake(conn.get_protocol_version_name(), group, cert, resumed, client)

    def _http(self, conn: SSL.Connection) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                try:
                    data = conn.recv(65536)
                except (SSL.ZeroReturnError, SSL.SysCallError, OSError):
                    return
                except SSL.Error:
                    return
                if not data:
                    return
                buf += data
                if len(buf) > 65536:
                    return
            head, buf = buf.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, path, *_ = (lines[0].split(" ") + ["", ""])[:3]
            headers = {
                k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
            }
            self.counters.add(requests=1)
            size = PAGES.get(path.split("?", 1)[0])
            status, body = (
                ("200 OK", sized_page(size)) if size is not None else ("404 Not Found", b"not found")
            )
            close = headers.get("connection", "").lower() == "close"
            reply = (
                f"HTTP/1.1 {status}\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n"
                f"{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
            ).encode()
            try:
                conn.sendall(reply + (b"" if method == "HEAD" else body))
            except (SSL.Error, OSError):
                return
            if close:
                return
