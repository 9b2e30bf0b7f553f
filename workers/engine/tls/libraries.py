"""The engine's TLS library, one per run (``EngineConfig.tls_library``), so a delta never mixes two.

* ``system``: Python's ``ssl`` on the OpenSSL the operating system links into Python (3.0 here);
* ``bundled``: pyOpenSSL on the OpenSSL the ``cryptography`` wheel carries (4.x: X25519MLKEM768,
  signature-algorithm lists, the groups API; ``docs/engine-protocol.md``).

Every client context of a run is made by ``make_context`` from the run's choice: the arms',
the preflight's and the Locust workers'. A bundled context is an ``OpenSSL.SSL.Context``; its connection
(``BundledTLS``) offers the surface of OpenSSL's socket object that ``http.cooperative.CoopConnection`` drives
(``do_handshake``, ``read``, ``write``, ``pending``, ``session``, ``session_reused``) and raises
``ssl``'s exceptions, so the cooperative client, its waits and its timing boundaries are the same
for both libraries. ``BlockingTLS`` is the same over a blocking socket with a timeout (the client on
plain threads, the benches' reference). ``describe`` is what the report records
(``run.engine.tls_library``).
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import ssl
import tempfile

import OpenSSL
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from OpenSSL import SSL
from OpenSSL._util import ffi as _ffi
from OpenSSL._util import lib as _lib

from portal.lib.runs.protocol import EngineConfig
from portal.lib.tls import clientcerts

# pyOpenSSL's cffi binding (``OpenSSL._util.lib``), ``Connection._ssl`` and ``Connection._raise_ssl_error``
# (``BundledTLS.read`` / ``write``) are private: checked on this version (tests/workers/test_private_api.py
# fails on another until checked again).
PRIVATE_API_CHECKED_ON = {"pyOpenSSL": "26.2"}
SYSTEM, BUNDLED = "system", "bundled"
LIBRARIES = (SYSTEM, BUNDLED)
Context = SSL.Context
HTTP1, H2 = ("http/1.1",), ("h2",)  # what a context offers over ALPN
WANT_READ, WANT_WRITE = "The operation did not complete (read)", "The operation did not complete (write)"
_unzeroed = _ffi.new_allocator(should_clear_after_alloc=False)  # as pyOpenSSL's own read buffers


def bundled_openssl() -> str:
    """The version text of the OpenSSL pyOpenSSL runs on, e.g. "OpenSSL 4.0.0 14 Apr 2026"."""
    return SSL.OpenSSL_version(SSL.OPENSSL_VERSION).decode()


def describe(choice: str) -> dict:
    """``run.engine.tls_library``: the choice, the OpenSSL behind it and the Python binding."""
    if choice == BUNDLED:
        binding = f"pyOpenSSL {OpenSSL.__version__}"
        return {"choice": BUNDLED, "openssl": bundled_openssl(), "binding": binding}
    return {"choice": SYSTEM, "openssl": ssl.OPENSSL_VERSION, "binding": "ssl"}


def bundled_context(verify: bool, cafile: str | None = None, alpn: tuple[str, ...] = HTTP1) -> SSL.Context:
    """A client context as ``client.make_ssl_context`` makes on ``ssl``, on the bundled library: TLS
    1.2 at least, ALPN ``alpn`` (http/1.1, or h2 alone for the HTTP/2 arms); with ``verify`` the CA
    bundle (``cafile``, or the system's) and the host name or IP address checked (``BundledTLS``)."""
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_alpn_protos([name.encode() for name in alpn])
    if verify:
        context.set_verify(SSL.VERIFY_PEER)
        if cafile:
            context.load_verify_locations(cafile)
        else:
            # pyOpenSSL falls back to the system's CA locations when the wheel's OpenSSL has none.
            context.set_default_verify_paths()
    else:
        context.set_verify(SSL.VERIFY_NONE)
    return context


def make_ssl_context(
    verify: bool, cafile: str | None = None, alpn: tuple[str, ...] = HTTP1
) -> ssl.SSLContext:
    """One context per arm, shared by every connection: building one costs up to ~20 ms."""
    if verify:
        context = ssl.create_default_context(cafile=cafile)
    else:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context


def make_context(
    library: str, verify: bool, cafile: str | None = None, alpn: tuple[str, ...] = HTTP1
) -> ssl.SSLContext | SSL.Context:
    """One context per arm on the run's TLS library (``EngineConfig.tls_library``):
    ``system`` is ``make_ssl_context``'s, ``bundled`` pyOpenSSL's with the same settings."""
    if library == BUNDLED:
        return bundled_context(verify, cafile, alpn)
    if library != SYSTEM:
        raise ValueError(f"unknown TLS library {library!r}")
    return make_ssl_context(verify, cafile, alpn)


def run_context(
    config: EngineConfig, arm: str | None = None, http2: bool = False
) -> ssl.SSLContext | SSL.Context:
    """The client context of a run's arm, from its ``EngineConfig``: the one place where the run's TLS
    options (library, verification) become a context, so a new TLS option of the run is read here.
    The ``tls_mtls`` arm's presents the run's client certificate (``clientcerts.arm_key_type``). The
    HTTP/2 arms (``http2``) offer h2 alone over ALPN: a server that does not select it refuses the
    arm, never serves it HTTP/1.1 unnoticed (``workers.engine.http.http2``)."""
    context = make_context(config.tls_library, config.verify_tls, alpn=H2 if http2 else HTTP1)
    if arm == clientcerts.MTLS_ARM:
        kind = clientcerts.arm_key_type(config.client_certs)
        if kind is None:
            raise ValueError(f"the {arm} arm has no client certificate: {clientcerts.NO_CERTIFICATE_HINT}")
        load_client_cert(context, config.client_certs[kind])
    return context


def load_client_cert(context: ssl.SSLContext | SSL.Context, pair: dict) -> None:
    """Make ``context`` present the client certificate ``pair`` (``{"cert": PEM chain, "key": PEM}``)
    when a server asks for one. pyOpenSSL takes it from memory (``use_certificate``,
    ``use_privatekey``, the rest of the chain as extra certificates); Python's ``ssl`` reads files
    only, so the pair is written to a private file (0600, in a fresh 0700 directory) that is gone
    once loaded."""
    if isinstance(context, SSL.Context):
        blocks = clientcerts.CERT_BLOCK.findall(pair["cert"])
        certs = [x509.load_pem_x509_certificate(block.encode("ascii")) for block in blocks]
        context.use_certificate(certs[0])
        for extra in certs[1:]:
            context.add_extra_chain_cert(extra)
        context.use_privatekey(serialization.load_pem_private_key(pair["key"].encode("utf-8"), password=None))
        context.check_privatekey()
        return
    with tempfile.TemporaryDirectory(prefix="tollgate-mtls-") as directory:
        path = os.path.join(directory, "pair.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(pair["cert"].strip() + "\n" + pair["key"].strip() + "\n")
        context.load_cert_chain(path)


def _eof() -> ssl.SSLEOFError:
    return ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "EOF occurred in violation of protocol")


def _error(exc: SSL.Error, conn: SSL.Connection) -> Exception:
    """A pyOpenSSL error as the ``ssl`` module raises it (the client classifies those)."""
    if isinstance(exc, SSL.SysCallError):
        code = exc.args[0] if exc.args else -1
        return _eof() if code in (-1, 0) else OSError(code, os.strerror(code))
    text = str(exc)
    if "certificate verify failed" in text:
        reason = _lib.X509_verify_cert_error_string(_lib.SSL_get_verify_result(conn._ssl))
        detail = _ffi.string(reason).decode() if reason else text
        return ssl.SSLCertVerificationError(
            1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {detail}"
        )
    return ssl.SSLError(1, f"[pyOpenSSL] {text}")


class BundledTLS:
    """TLS on a connected socket through pyOpenSSL, with the surface of OpenSSL's socket object in
    ``ssl`` (what ``http.cooperative.CoopConnection`` calls): "would block" is ``ssl.SSLWantReadError`` /
    ``SSLWantWriteError``, a TCP close without close_notify ``ssl.SSLEOFError``, a clean close b""."""

    __slots__ = ("conn", "_ssl", "_buffer")

    def __init__(self, context: SSL.Context, sock, server_hostname: str, session: SSL.Session | None) -> None:
        conn = SSL.Connection(context, sock)
        conn.set_connect_state()
        ip = _ip(server_hostname)
        if ip is None:
            conn.set_tlsext_host_name(server_hostname.encode("idna"))  # SNI: never for an IP literal
        if context.get_verify_mode() != SSL.VERIFY_NONE:
            # Check the name (or the IP address) as ssl's check_hostname does, inside OpenSSL.
            param = _lib.SSL_get0_param(conn._ssl)
            _lib.X509_VERIFY_PARAM_set_hostflags(param, _lib.X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS)
            if ip is None:
                name = server_hostname.encode("idna")
                ok = _lib.X509_VERIFY_PARAM_set1_host(param, name, len(name))
            else:
                ok = _lib.X509_VERIFY_PARAM_set1_ip(param, ip, len(ip))
            if ok != 1:
                raise ssl.SSLError(1, f"cannot check the certificate for {server_hostname!r}")
        if session is not None:
            conn.set_session(session)
        self.conn = conn
        self._ssl = conn._ssl
        self._buffer = None  # the read buffer, made on the first read

    def _call(self, call, *args):
        try:
            return call(*args)
        except SSL.WantReadError:
            raise ssl.SSLWantReadError(ssl.SSL_ERROR_WANT_READ, WANT_READ) from None
        except SSL.WantWriteError:
            raise ssl.SSLWantWriteError(ssl.SSL_ERROR_WANT_WRITE, WANT_WRITE) from None
        except SSL.ZeroReturnError:
            return b""  # close_notify: the end
        except SSL.Error as exc:
            raise _error(exc, self.conn) from None

    def do_handshake(self) -> None:
        self._call(self.conn.do_handshake)

    def read(self, size: int) -> bytes:
        """``SSL_read`` into one buffer kept for the connection; only when it reads nothing does
        pyOpenSSL say why (would block, the end, an error), as ``Connection.recv`` does after every
        read. The bytes are the same; what is saved is a 64 KiB allocation and the library's checks
        on a read that succeeded."""
        buffer = self._buffer
        if buffer is None or len(buffer) < size:
            buffer = self._buffer = _unzeroed("char[]", size)  # pages touched only as reads fill them
        got = _lib.SSL_read(self._ssl, buffer, size)
        if got > 0:
            return _ffi.unpack(buffer, got)
        self._call(self.conn._raise_ssl_error, self._ssl, got)
        return b""  # the end (close_notify), or nothing read without an error

    def write(self, data) -> int:
        """``SSL_write`` of the bytes, the errors as in ``read``: ``Connection.send`` without its
        checks on a write that succeeded. A request's head (``bytes``) goes to OpenSSL as it is, cffi
        passing its buffer; a remainder (a ``memoryview`` from ``sendall``) through ``from_buffer``."""
        if type(data) is bytes:
            sent = _lib.SSL_write(self._ssl, data, len(data))
        else:
            with _ffi.from_buffer(data) as view:
                sent = _lib.SSL_write(self._ssl, view, len(view))
        if sent > 0:
            return sent
        self._call(self.conn._raise_ssl_error, self._ssl, sent)
        # Not raised: the peer's close_notify (``_call`` reads it as the end). A write returning 0 would
        # have ``sendall`` ask again forever; ``ssl`` raises this for it.
        raise ssl.SSLZeroReturnError(ssl.SSL_ERROR_ZERO_RETURN, "TLS/SSL connection has been closed (EOF)")

    def pending(self) -> int:
        return _lib.SSL_pending(self._ssl)  # ``Connection.pending``'s one call, asked before every answer

    @property
    def session(self) -> SSL.Session | None:
        return self.conn.get_session()

    @property
    def session_reused(self) -> bool:
        return bool(_lib.SSL_session_reused(self.conn._ssl))  # pyOpenSSL has no method for it

    def version(self) -> str | None:
        return self.conn.get_protocol_version_name()

    def selected_alpn_protocol(self) -> str | None:
        chosen = self.conn.get_alpn_proto_negotiated()
        return chosen.decode("ascii", "replace") if chosen else None

    def close(self) -> None:
        """Mark the connection as shut down before OpenSSL frees it (no close_notify is sent): an
        ``SSL`` freed otherwise makes its session unresumable, as CPython's ``_ssl`` avoids too."""
        conn = self.conn
        conn.set_shutdown(conn.get_shutdown() | SSL.SENT_SHUTDOWN)


def _ip(name: str) -> bytes | None:
    try:
        return ipaddress.ip_address(name).packed
    except ValueError:
        return None


class BlockingTLS:
    """``BundledTLS`` over a connected socket with a timeout, blocking the calling thread: the
    surface of ``ssl.SSLSocket`` the client uses (``send``, ``sendall``, ``recv``, ``pending``,
    ``session``, ``session_reused``, ``close``). The handshake happens here."""

    def __init__(self, context: SSL.Context, sock: socket.socket, server_hostname: str, session=None) -> None:
        self.sock = sock
        self.timeout_s = sock.gettimeout()
        self.tls = BundledTLS(context, sock, server_hostname, session)
        self._io(self.tls.do_handshake)

    def _io(self, call, *args):
        while True:
            try:
                return call(*args)
            except ssl.SSLWantReadError:
                self._wait([self.sock], [])
            except ssl.SSLWantWriteError:
                self._wait([], [self.sock])

    def _wait(self, readers: list, writers: list) -> None:
        ready = select.select(readers, writers, [], self.timeout_s)
        if not (ready[0] or ready[1]):
            raise TimeoutError("timed out")

    def send(self, data) -> int:
        return self._io(self.tls.write, data)

    def sendall(self, data) -> None:
        view = memoryview(data)
        while view:
            view = view[self.send(view) :]

    def recv(self, size: int) -> bytes:
        try:
            return self._io(self.tls.read, size)
        except ssl.SSLEOFError:
            return b""  # a TCP close without close_notify reads as the end, as SSLSocket's default

    def pending(self) -> int:
        return self.tls.pending()

    @property
    def session(self):
        return self.tls.session

    @property
    def session_reused(self) -> bool:
        return self.tls.session_reused

    def version(self) -> str | None:
        return self.tls.version()

    def selected_alpn_protocol(self) -> str | None:
        return self.tls.selected_alpn_protocol()

    def close(self) -> None:
        self.tls.close()
        self.sock.close()
